#!/usr/bin/env python3
"""The `weights=` fingerprint of tandem's result lines, checked against its definition.

usage: weights_fingerprint_check.py TANDEM WORKDIR

- A short MNIST run on 2 devices saves its checkpoint; `tandem consolidate` writes its state
  dict, which PyTorch (python3-torch) loads. The fingerprint computed here from that state dict,
  as README and include/tandem/train/fingerprint.h define it (each parameter's line "name sizes
  crc", sorted by name; the CRC-32C of the lines, crcmod from python3-crcmod), must be the one
  the run printed.
- `tandem eval` of that checkpoint prints the same fingerprint, and so do the same command on
  1 device, on 4 devices under ZB-H1, on 3 under GPipe and on 2 under ZB-V (the same weights,
  bit for bit: every schedule adds the micro-batches' weight gradients in ascending order).
- Another seed prints another fingerprint, and so does the state dict with one bit of one
  parameter flipped: the fingerprint tells different weights apart.
Exits 77 (a skip for ctest) when this Python lacks torch or crcmod.
"""

import os
import re
import shutil
import subprocess
import sys

try:
    import crcmod.predefined
    import torch
except ImportError as e:
    print(f"SKIP: {e}; install python3-torch and python3-crcmod (scripts/setup does)")
    sys.exit(77)

MODEL = ["--model", "mlp", "--width", "32", "--blocks", "2", "--batch", "32", "--microbatches",
         "4", "--eval-batch", "5000"]
COMMON = MODEL + ["--steps", "3", "--progress", "none"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(tandem, *args):
    done = subprocess.run([tandem, *args], capture_output=True, text=True, timeout=150)
    if done.returncode != 0:
        fail(f"'{' '.join(args)}' exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def printed_weights(output, what):
    found = re.search(r"^(?:\[r\d+/\d+\] )?result: .* weights=([0-9a-f]{8})$", output, re.M)
    if not found:
        fail(f"{what}: no result line ending in weights=<8 hex digits>:\n{output}")
    return found.group(1)


def fingerprint(state):
    crc32c = crcmod.predefined.mkCrcFun("crc-32c")
    text = b""
    for name in sorted(state, key=lambda n: n.encode()):
        t = state[name].detach().contiguous()
        data = t.numpy().tobytes()  # little endian on x86-64, as tandem hashes it
        sizes = "x".join(str(s) for s in t.shape) if t.dim() else "-"
        text += f"{name} {sizes} {crc32c(data):08x}\n".encode()
    return f"{crc32c(text):08x}"


def main():
    tandem, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    save = os.path.join(work, "run")
    trained = printed_weights(
        run(tandem, "train", *COMMON, "--seed", "4", "--devices", "2", "--save-dir", save),
        "train on 2 devices")
    model = os.path.join(work, "model.pt")
    run(tandem, "consolidate", save, "-o", model)
    state = torch.load(model)
    if not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        fail(f"{model} is not a state dict of tensors")
    computed = fingerprint(state)
    if computed != trained:
        fail(f"the run printed weights={trained}, but its consolidated state dict's "
             f"{len(state)} parameters give {computed} by the definition")
    print(f"weights={trained}: the run's, and its state dict's by the definition "
          f"({len(state)} parameters)")

    same = {
        "eval of the checkpoint on 1 device": run(
            tandem, "eval", "--checkpoint", save, *MODEL, "--seed", "4", "--devices", "1"),
        "the same run on 1 device": run(tandem, "train", *COMMON, "--seed", "4", "--devices", "1"),
        "the same run on 4 devices (zb-h1)": run(
            tandem, "train", *COMMON, "--seed", "4", "--devices", "4", "--schedule", "zb-h1"),
        "the same run on 3 devices (gpipe)": run(
            tandem, "train", *COMMON, "--seed", "4", "--devices", "3", "--schedule", "gpipe"),
        "the same run on 2 devices (zb-v)": run(
            tandem, "train", *COMMON, "--seed", "4", "--devices", "2", "--schedule", "zb-v"),
        "the same run on 2 devices (v-min)": run(
            tandem, "train", *COMMON, "--seed", "4", "--devices", "2", "--schedule", "v-min"),
    }
    for what, output in same.items():
        got = printed_weights(output, what)
        if got != trained:
            fail(f"{what} printed weights={got}, not the 2-device run's {trained}")
        print(f"weights={got}: {what}")

    other = printed_weights(run(tandem, "train", *COMMON, "--seed", "5", "--devices", "2"),
                            "another seed")
    if other == trained:
        fail(f"another seed printed the same weights={other}")
    name = sorted(state)[0]
    flipped = dict(state)
    bits = flipped[name].detach().clone().contiguous().view(torch.int32)
    bits.view(-1)[0] ^= 1
    flipped[name] = bits.view(torch.float32)
    if fingerprint(flipped) == trained:
        fail(f"one bit flipped in {name} leaves the fingerprint {trained}")
    print(f"another seed: weights={other}; one bit flipped in {name}: {fingerprint(flipped)}")


if __name__ == "__main__":
    main()
