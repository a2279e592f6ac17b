#!/usr/bin/env python3
"""--precision bf16: split runs against one device, within bf16's rounding.

usage: precision_check.py TANDEM WORKDIR [ONNX_UNET]

- --precision fp16 on CPU devices is refused at start (status 2), and so is --precision bf16 with
  --cpu-kernels portable (oneDNN capped at AVX2 has no bf16 kernels), naming the way out.
- With --cpu-kernels native on a processor whose kernels compute bf16 (else exit 77, a skip):
  the MLP on 1 device, on 2 stages (1F1B, 4 micro-batches) and on 4 stages under ZB-H1 (its
  split backward), the PyTorch U-Net exported to ONNX (ONNX_UNET, when given) on 1 device and on
  2 slabs, and the U-Net on 1 device, on 2 slabs and on 2 stages of 2 slabs with
  --recompute stage, 3 SGD steps each. The weights every split run trains (tandem consolidate's
  state dict, read by PyTorch) are within SHARE (0.5) of the distance between the one-device run's
  in bf16 and in fp32 (norms of all parameters): the forwards did compute in bf16, and the
  splits agree to bf16's rounding. Every checkpoint holds float32 parameters.
- A bf16 run of the U-Net on 2 slabs resumed from its checkpoint after 2 of 4 steps prints the
  weights of the uninterrupted run, bit for bit; both parts scale their loss (--loss-scale
  dynamic, doubling after every clean step), which changes no bit of the weights, and the
  resumed part's report shows the scale going on from the checkpoint's (2^16 x 2^4).
- Under mpirun (2 ranks, where mpirun exists): the MLP on 2 stages and the U-Net on 2 slabs in
  bf16 print the weights fingerprint of the same run in one process, bit for bit.
- Under mpirun -n 4: the MLP on 2 replicas of 2 stages, each replica on half the batch, trains
  weights within the tolerance of the one-device run on the whole batch.
"""

import json
import os
import re
import shutil
import subprocess
import sys

TANDEM, WORK = sys.argv[1], sys.argv[2]
ONNX_UNET = sys.argv[3] if len(sys.argv) > 3 else ""
# The tolerance is set by bf16's rounding as this run meets it: a share of how far the same run
# in fp32 trains from the bf16 one. A split's sums in another order round differently, by much
# less than computing in fp32 instead of bf16 does (measured: 0.05 of it for the MLP, 0.19 for
# the U-Net, 0.32 for the ONNX U-Net on 2 slabs, whose instance norms sum over both slabs); a lost
# micro-batch or halo changes a step's gradient itself, by far more.
SHARE = 0.5

MLP = ["--model", "mlp", "--width", "64", "--blocks", "2", "--batch", "32", "--train-samples",
       "96", "--test-samples", "32"]
UNET = ["--model", "unet3d", "--levels", "2", "--filters", "4", "--data", "spheres", "--volume",
        "16", "--batch", "2", "--train-samples", "6", "--test-samples", "2", "--dropout", "0"]
COMMON = ["--steps", "3", "--progress", "none", "--seed", "0", "--optimizer", "sgd", "--lr", "0.1"]
NATIVE = ["--cpu-kernels", "native"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(*args, status=0):
    p = subprocess.run([TANDEM, "train", *args], capture_output=True, text=True, timeout=240)
    if p.returncode != status:
        fail(f"tandem train {' '.join(args)}: status {p.returncode}, expected {status}\n"
             f"{p.stdout}\n{p.stderr}")
    return p


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

p = run(*MLP, *COMMON, "--devices", "1", "--precision", "fp16", status=2)
if "fp16" not in p.stderr or "bf16" not in p.stderr:
    fail("--precision fp16: the refusal names no way out:\n" + p.stderr)
p = run(*MLP, *COMMON, "--devices", "1", "--precision", "bf16", "--cpu-kernels", "portable",
        status=2)
if "--cpu-kernels native" not in p.stderr:
    fail("--precision bf16 with portable kernels: the refusal names no way out:\n" + p.stderr)
print("ok fp16, and bf16 on portable kernels, refused at start")

probe = subprocess.run([TANDEM, "train", *MLP, *COMMON, "--steps", "1", "--devices", "1",
                        "--precision", "bf16", *NATIVE], capture_output=True, text=True,
                       timeout=240)
if probe.returncode == 2 and "cannot compute in bf16" in probe.stderr:
    print("SKIP: this processor's kernels compute no bf16: " + probe.stderr.strip())
    sys.exit(77)
try:
    import torch
except ImportError:
    print("SKIP: this Python has no torch (python3-torch) to read the checkpoints")
    sys.exit(77)


def weights(name, *args):
    """The parameters a run trains (float64 copies), after checking they are saved as float32."""
    save = os.path.join(WORK, name)
    run(*args, *COMMON, "--save-dir", save)
    state = save + ".pt"
    c = subprocess.run([TANDEM, "consolidate", "--checkpoint", save, "-o", state],
                       capture_output=True, text=True, timeout=120)
    if c.returncode != 0:
        fail("tandem consolidate: " + c.stdout + c.stderr)
    loaded = torch.load(state)
    odd = {k: str(v.dtype) for k, v in loaded.items() if v.dtype != torch.float32}
    if odd:
        fail(f"{name}: the checkpoint holds parameters that are not float32: {odd}")
    return {k: v.double() for k, v in loaded.items()}


def apart(a, b):
    """How far all the parameters of `a` are from `b`'s: the norm of the difference over `b`'s."""
    diff = sum(float((a[k] - b[k]).pow(2).sum()) for k in b)
    size = sum(float(b[k].pow(2).sum()) for k in b)
    return (diff / size) ** 0.5


ONNX = ["--model", ONNX_UNET, "--data", "spheres", "--volume", "8", "--batch", "2",
        "--train-samples", "6", "--test-samples", "2", "--loss", "dice"]
cases = [(MLP, [["--devices", "2", "--microbatches", "4"],
                ["--devices", "4", "--microbatches", "4", "--schedule", "zb-h1"]])]
if ONNX_UNET and os.path.exists(ONNX_UNET):
    cases.append((ONNX, [["--devices", "2", "--spatial", "2", "--microbatches", "1"]]))
else:
    print(f"no ONNX U-Net at {ONNX_UNET!r}: ONNX graphs in bf16 not checked")
reference = {}  # by model: the one-device bf16 weights and the tolerance
for model, layouts in (
        *cases,
        (UNET, [["--devices", "2", "--spatial", "2", "--microbatches", "2"],
                ["--devices", "4", "--spatial", "2", "--stages", "2", "--microbatches", "2",
                 "--recompute", "stage"]])):
    name = os.path.basename(model[1])
    one = weights(name + "-bf16-1", *model, *NATIVE, "--devices", "1", "--microbatches", "1",
                  "--precision", "bf16")
    fp32 = weights(name + "-fp32-1", *model, *NATIVE, "--devices", "1", "--microbatches", "1")
    rounding = apart(one, fp32)
    if rounding < 1e-7:
        fail(f"{name}: the weights of fp32 and bf16 runs are {rounding:.2e} apart: the bf16 run "
             f"computed in fp32")
    tolerance = SHARE * rounding
    reference[name] = (one, tolerance)
    for i, layout in enumerate(layouts):
        split = weights(f"{name}-bf16-split{i}", *model, *NATIVE, *layout, "--precision", "bf16")
        d = apart(split, one)
        if d > tolerance:
            fail(f"{name} {' '.join(layout)}: bf16 weights {d:.2e} from one device's, above "
                 f"{tolerance:.2e} ({SHARE} of the fp32 run's {rounding:.2e})")
        print(f"ok {name} {' '.join(layout)}: bf16 weights {d:.1e} from one device's "
              f"(the fp32 run's: {rounding:.1e})")
print("ok every checkpoint holds float32 parameters")

resumed = [*UNET, *NATIVE, "--devices", "2", "--spatial", "2", "--microbatches", "2",
           "--precision", "bf16", "--lr-schedule", "constant", "--progress", "none", "--seed", "0"]
whole = re.search(r"weights=(\w+)", run(*resumed, "--steps", "4").stdout).group(1)
scaled = ["--loss-scale", "dynamic", "--loss-scale-interval", "1"]
run(*resumed, *scaled, "--steps", "2", "--save-dir", os.path.join(WORK, "resume"))
report = os.path.join(WORK, "resumed.json")
again = re.search(r"weights=(\w+)",
                  run(*resumed, *scaled, "--steps", "4", "--resume", os.path.join(WORK, "resume"),
                      "--report", report).stdout)
if not again or again.group(1) != whole:
    fail(f"a bf16 run with loss scaling resumed after 2 of 4 steps printed "
         f"{again.group(1) if again else None}, the uninterrupted run without scaling "
         f"weights={whole}")
with open(report) as f:
    loss_scale = json.load(f).get("loss_scale")
if loss_scale != {"scale": 65536.0 * 16, "skipped_steps": 0, "skipped": []}:
    fail(f"the resumed run's report has loss_scale {loss_scale}, want the scale 2^20 (2^16 doubled "
         f"after each of 4 clean steps) and no step skipped")
print(f"ok a bf16 run resumed after 2 of 4 steps: weights={whole}, as uninterrupted and as "
      f"without loss scaling; the scale went on from the checkpoint's")

mpirun = shutil.which("mpirun")
if not mpirun:
    print("no mpirun: bf16 under MPI not checked")
    sys.exit(0)


def launcher(n):
    return [mpirun, "--oversubscribe", "--bind-to", "none", "-n", str(n),
            *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]


ranks = launcher(2)
for model, layout in ((MLP, ["--devices", "2", "--microbatches", "4"]),
                      (UNET, ["--devices", "2", "--spatial", "2", "--microbatches", "2"])):
    args = [*model, *COMMON, *NATIVE, *layout, "--precision", "bf16"]
    here = re.search(r"weights=(\w+)", run(*args).stdout)
    p = subprocess.run([*ranks, TANDEM, "train", *args], capture_output=True, text=True,
                       timeout=240)
    there = re.search(r"weights=(\w+)", p.stdout)
    if p.returncode != 0 or not here or not there or here.group(1) != there.group(1):
        fail(f"{model[1]} {' '.join(layout)} in bf16: one process printed "
             f"{here.group(1) if here else None}, 2 MPI ranks {there.group(1) if there else None} "
             f"(status {p.returncode})\n{p.stdout}\n{p.stderr}")
    print(f"ok {model[1]} {' '.join(layout)} in bf16 under mpirun -n 2: weights={here.group(1)}, "
          "as in one process")

# Replicas: 2 pipelines of 2 stages, each on half of the one-device run's batch of 32.
save = os.path.join(WORK, "mlp-bf16-replicas")
half = [("16" if a == "32" and MLP[i - 1] == "--batch" else a) for i, a in enumerate(MLP)]
p = subprocess.run([*launcher(4), TANDEM, "train",
                    *half, *COMMON, *NATIVE, "--devices", "2", "--replicas", "2",
                    "--microbatches", "2", "--precision", "bf16", "--save-dir", save],
                   capture_output=True, text=True, timeout=240)
if p.returncode != 0:
    fail(f"the MLP on 2 replicas of 2 stages in bf16 under mpirun -n 4: status {p.returncode}\n"
         f"{p.stdout}\n{p.stderr}")
c = subprocess.run([TANDEM, "consolidate", "--checkpoint", save, "-o", save + ".pt"],
                   capture_output=True, text=True, timeout=120)
if c.returncode != 0:
    fail("tandem consolidate: " + c.stdout + c.stderr)
one, tolerance = reference["mlp"]
d = apart({k: v.double() for k, v in torch.load(save + ".pt").items()}, one)
if d > tolerance:
    fail(f"mlp on 2 replicas of 2 stages: bf16 weights {d:.2e} from one device's, above "
         f"{tolerance:.2e}")
print(f"ok mlp on 2 replicas of 2 stages under mpirun -n 4: bf16 weights {d:.1e} from one "
      f"device's on the whole batch (tolerance {tolerance:.1e})")
