#!/usr/bin/env python3
"""`tandem train --tensorboard DIR` read back the way TensorBoard reads it, without tandem.

usage: tensorboard_check.py TANDEM WORKDIR

Trains 4 steps with the cosine learning-rate schedule and decodes the one event file in
WORKDIR/tb with libraries that know nothing of tandem:
  - TFRecord framing: each record is a little-endian uint64 length, the masked CRC-32C of those
    8 bytes, the data, and the masked CRC-32C of the data; both CRCs are computed with crcmod
    (python3-crcmod) and the file ends exactly after the last record;
  - each record is a tensorflow.Event, parsed by Google's protobuf runtime (python3-protobuf)
    from a descriptor with the field numbers of tensorflow/core/util/event.proto and
    summary.proto; the parse leaves no unknown field, and re-serializing gives the record's
    bytes back (tandem writes what protobuf itself would);
  - the first Event carries file_version "brain.Event:2"; then, for steps 1..4 in order,
    train/loss, train/samples_per_s, train/learning_rate, train/loss_scale and
    train/skipped_steps (the run scales its loss, --loss-scale dynamic, doubling every 2
    steps), one value per Event; then test/accuracy at step 4;
  - the values are the run's: the learning rate of step s is float32(lr * (1 + cos(pi (s-1) /
    4)) / 2) exactly, the last loss and the accuracy are those of the result line (printed to 4
    decimals: within 5e-5), samples/s is positive, and the wall times do not decrease and lie
    within the run.
Exits 77 (a skip for ctest) when this Python lacks protobuf or crcmod.
"""

import glob
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time

try:
    import crcmod.predefined
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:
    print(f"SKIP: {e}; install python3-protobuf and python3-crcmod (scripts/setup does)")
    sys.exit(77)

LR = 0.01
STEPS = 4


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def event_class():
    """tensorflow.Event with the fields tandem writes, numbered as in TensorFlow's protos."""
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tandem_check_event.proto",
                                               package="tensorflow", syntax="proto3")
    summary = proto.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorflow.Summary.Value")
    event = proto.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorflow.Summary", oneof_index=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tensorflow.Event"))


CRC32C = crcmod.predefined.mkCrcFun("crc-32c")


def masked_crc(data):
    crc = CRC32C(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            fail(f"{path}: a record header cut short at byte {at}")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked_crc(header):
            fail(f"{path}: the length CRC of the record at byte {at} does not match")
        end = at + 12 + length + 4
        if end > len(data):
            fail(f"{path}: the record at byte {at} says {length} bytes; the file ends first")
        payload = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[end - 4:end])
        if data_crc != masked_crc(payload):
            fail(f"{path}: the data CRC of the record at byte {at} does not match")
        yield payload
        at = end


def main():
    if len(sys.argv) != 3:
        fail("usage: tensorboard_check.py TANDEM WORKDIR")
    tandem, work = sys.argv[1], sys.argv[2]
    tb = os.path.join(work, "tb")
    shutil.rmtree(tb, ignore_errors=True)
    command = [tandem, "train", "--devices", "2", "--steps", str(STEPS), "--batch", "32",
               "--microbatches", "4", "--eval-batch", "5000", "--progress", "none",
               "--lr", str(LR), "--tensorboard", tb,
               "--loss-scale", "dynamic", "--loss-scale-interval", "2"]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    ended = time.time()
    if done.returncode != 0:
        fail(f"'{' '.join(command)}' exited with {done.returncode}\n{done.stdout}\n{done.stderr}")
    result = re.search(r"^result: .*\bloss=([0-9.]+) test_accuracy=([0-9.]+)", done.stdout, re.M)
    if not result:
        fail(f"no result line with loss and test_accuracy:\n{done.stdout}")
    printed_loss, printed_accuracy = float(result.group(1)), float(result.group(2))

    files = glob.glob(os.path.join(tb, "*"))
    if len(files) != 1 or not re.fullmatch(r"events\.out\.tfevents\.\d+\.[^/]+\.\d+\.\d+",
                                           os.path.basename(files[0])):
        fail(f"want one events.out.tfevents.<seconds>.<host>.<pid>.<n> file in {tb}, got {files}")
    Event = event_class()
    events = []
    for payload in records(files[0]):
        event = Event()
        event.ParseFromString(payload)
        clean = Event()
        clean.CopyFrom(event)
        clean.DiscardUnknownFields()
        if clean.SerializeToString(deterministic=True) != payload:
            fail(f"an Event with fields this check does not know, or not encoded as protobuf "
                 f"would: {payload.hex()} reads as {event}")
        events.append(event)

    if not events or events[0].file_version != "brain.Event:2":
        fail(f"the first Event is not the file version: {events[:1]}")
    scalars = []
    for event in events[1:]:
        if event.WhichOneof("what") != "summary" or len(event.summary.value) != 1:
            fail(f"want one scalar per Event, got {event}")
        value = event.summary.value[0]
        if value.WhichOneof("value") != "simple_value":
            fail(f"not a simple_value: {event}")
        scalars.append((event.step, value.tag, value.simple_value, event.wall_time))
    want_tags = [(s, tag) for s in range(1, STEPS + 1)
                 for tag in ("train/loss", "train/samples_per_s", "train/learning_rate",
                             "train/loss_scale", "train/skipped_steps")]
    want_tags.append((STEPS, "test/accuracy"))
    if [(s, tag) for s, tag, _, _ in scalars] != want_tags:
        fail(f"scalars {[(s, tag) for s, tag, _, _ in scalars]}, want {want_tags}")

    times = [events[0].wall_time] + [t for *_, t in scalars]
    if times != sorted(times) or times[0] < started - 1 or times[-1] > ended + 1:
        fail(f"wall times {times} are not in order within the run ({started}..{ended})")
    for step, tag, value, _ in scalars:
        if tag == "train/learning_rate":
            want = struct.unpack("<f", struct.pack(
                "<f", LR * 0.5 * (1 + math.cos(math.pi * (step - 1) / STEPS))))[0]
            if value != want:
                fail(f"learning rate {value!r} at step {step}, want {want!r} (cosine over "
                     f"{STEPS} steps from {LR})")
        elif tag == "train/loss_scale" and value != 65536.0 * 2 ** ((step - 1) // 2):
            fail(f"loss scale {value} at step {step}, want 2^16 doubled after every 2 clean "
                 f"steps")
        elif tag == "train/skipped_steps" and value != 0:
            fail(f"{value} skipped steps at step {step} of a run that never overflows")
        elif tag == "train/samples_per_s" and not (value > 0 and math.isfinite(value)):
            fail(f"samples/s {value} at step {step}")
        elif tag == "train/loss" and not math.isfinite(value):
            fail(f"loss {value} at step {step}")
    value_of = {(step, tag): value for step, tag, value, _ in scalars}
    last_loss, accuracy = value_of[(STEPS, "train/loss")], value_of[(STEPS, "test/accuracy")]
    if abs(last_loss - printed_loss) > 5e-5 or abs(accuracy - printed_accuracy) > 5e-5:
        fail(f"the event file says loss {last_loss} and accuracy {accuracy}; the result line "
             f"{printed_loss} and {printed_accuracy}")
    print(f"{files[0]}: {len(events)} events in valid records; loss, samples/s and learning rate "
          f"for {STEPS} steps, then test/accuracy, with the run's values")


if __name__ == "__main__":
    main()
