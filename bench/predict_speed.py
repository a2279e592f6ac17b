"""tandem predict's speed on a whole head against what users run in PyTorch, with the same weights.

Usage: predict_speed.py TANDEM WORKDIR [REPEATS]

A PyTorch 3D U-Net (examples/onnx/from_pytorch.py: 8 filters, instance norm, one pooling,
transposed convolution, concatenated skip, sigmoid) exported to ONNX with dynamic D, H and W,
trained by tandem for one epoch of 32³ crops of `--data mri`, and its weights written back
(`tandem consolidate`) and loaded into the PyTorch module. Then the whole ch2 head
(181 x 217 x 181, Debian's mricron-data), standardized over the head as training did:

- tandem predict in one piece on 1 device of 2 threads and on 2 devices of 1 thread
  (`--spatial 2`): the forward's seconds from the result line;
- PyTorch's plain whole-volume forward under torch.no_grad() (padded to even sides);
- a sliding-window inference written here with MONAI's defaults: windows of the training size
  (32³), overlap 0.25, gaussian importance (sigma 0.125 of the window), one window at a time,
  stitched on the CPU (MONAI's sliding_window_inference is not packaged by Debian).

PyTorch gets the same two cores (torch.set_num_threads(2)). Runs alternate, REPEATS (3) of
each; medians. The masks at 0.5 are compared by Dice with each other and with ch2bet's brain
mask (> 0).
"""
import os
import re
import statistics
import subprocess
import sys
import time

import nibabel as nib
import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "examples", "onnx"))
import from_pytorch  # noqa: E402

tandem, work = sys.argv[1], sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
os.makedirs(work, exist_ok=True)
head_path = "/usr/share/mricron/templates/ch2.nii.gz"
brain_path = "/usr/share/mricron/templates/ch2bet.nii.gz"
torch.set_num_threads(2)


def call(*args):
    done = subprocess.run([tandem, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"tandem {' '.join(args)}: status {done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout


# The model, trained by tandem, and its weights back in PyTorch.
torch.manual_seed(0)
model = from_pytorch.Unet3d(8)
onnx_path = os.path.join(work, "unet.onnx")
dynamic = {0: "batch", 2: "depth", 3: "height", 4: "width"}
torch.onnx.export(model, torch.randn(2, 1, 32, 32, 32), onnx_path, opset_version=13,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": dynamic, "output": dynamic})
ckpt = os.path.join(work, "ckpt")
train = call("train", "--model", onnx_path, "--loss", "dice", "--data", "mri", "--volume", "32",
             "--batch", "8", "--microbatches", "2", "--devices", "2", "--epochs", "1",
             "--train-samples", "768", "--test-samples", "64", "--optimizer", "adam", "--lr",
             "3e-3", "--seed", "0", "--progress", "none", "--save-dir", ckpt, "--overwrite")
test_dice = re.search(r"test_dice=([0-9.]+)", train).group(1)
state_path = os.path.join(work, "trained.pt")
call("consolidate", "--checkpoint", ckpt, "-o", state_path)
model.load_state_dict(torch.load(state_path))
model.eval()

# The head as training standardized it: over the voxels > 0 (data::head_standardized).
zyx = np.asarray(nib.load(head_path).dataobj, dtype=np.float64).transpose(2, 1, 0)
head = zyx[zyx > 0]
x = ((zyx - head.mean()) / head.std(ddof=1)).astype(np.float32)
brain = np.asarray(nib.load(brain_path).dataobj).transpose(2, 1, 0) > 0
xt = torch.from_numpy(x)[None, None]


def whole_forward():
    pads = [(0, s % 2) for s in x.shape]  # to even sides, zeros after the last plane
    padded = F.pad(xt, (0, pads[2][1], 0, pads[1][1], 0, pads[0][1]))
    start = time.perf_counter()
    with torch.no_grad():
        y = model(padded)
    seconds = time.perf_counter() - start
    return y[0, 0, :x.shape[0], :x.shape[1], :x.shape[2]].numpy(), seconds


def starts(size, window, overlap):
    step = max(1, int(window * (1 - overlap)))
    count = -(-(size - window) // step) + 1
    return [min(i * step, size - window) for i in range(count)]


def sliding_window(window=32, overlap=0.25):
    i = np.arange(window, dtype=np.float64)
    g = np.exp(-(i - (window - 1) / 2) ** 2 / (2 * (window * 0.125) ** 2))
    weight = torch.from_numpy((g[:, None, None] * g[None, :, None] * g[None, None, :])
                              .astype(np.float32))
    start = time.perf_counter()
    total = torch.zeros(x.shape)
    norm = torch.zeros(x.shape)
    with torch.no_grad():
        for a in starts(x.shape[0], window, overlap):
            for b in starts(x.shape[1], window, overlap):
                for c in starts(x.shape[2], window, overlap):
                    part = (slice(a, a + window), slice(b, b + window), slice(c, c + window))
                    y = model(xt[(0, 0, *part)][None, None])[0, 0]
                    total[part] += y * weight
                    norm[part] += weight
    out = (total / norm).numpy()
    return out, time.perf_counter() - start


def tandem_predict(devices):
    out = os.path.join(work, f"tandem_{devices}.npy")
    # The two cores: one device of two threads, or two devices of one.
    text = call("predict", "--model", onnx_path, "--loss", "dice", "--checkpoint", ckpt,
                "--standardize", "head", "--devices", str(devices), "--spatial", str(devices),
                "--threads-per-device", str(2 // devices), "--input", head_path, "--output",
                out, "--progress", "none")
    seconds = float(re.search(r"seconds=([0-9.]+)", text).group(1))
    return np.load(out), seconds  # a .npy result of a NIfTI scan: [z,y,x], as read


runs = {"tandem 1 device (2 threads)": lambda: tandem_predict(1),
        "tandem 2 devices (--spatial 2, 1 thread each)": lambda: tandem_predict(2),
        "PyTorch whole volume, no_grad": whole_forward,
        "PyTorch sliding window (MONAI defaults)": sliding_window}
seconds = {name: [] for name in runs}
outputs = {}
for _ in range(repeats):
    for name, fn in runs.items():
        out, s = fn()
        seconds[name].append(s)
        outputs[name] = out


def dice(a, b):
    return 2 * np.logical_and(a, b).sum() / (a.sum() + b.sum())


masks = {name: out >= 0.5 for name, out in outputs.items()}
two = "tandem 2 devices (--spatial 2, 1 thread each)"
base = statistics.median(seconds["PyTorch whole volume, no_grad"])
window = statistics.median(seconds["PyTorch sliding window (MONAI defaults)"])
print(f"Model: examples/onnx/from_pytorch.py Unet3d(8), trained by tandem (one epoch of 32³ "
      f"crops of --data mri, 768 samples: test_dice={test_dice}); the whole ch2 head "
      f"{x.shape[0]}x{x.shape[1]}x{x.shape[2]}; {repeats} runs each, in turn; PyTorch "
      f"{torch.__version__} on 2 threads.")
print()
print("| run | seconds (median, min-max) | against PyTorch whole | against the sliding window | "
      "Dice vs tandem 2 devices | Dice vs ch2bet |")
print("|---|---|---|---|---|---|")
for name in runs:
    s = seconds[name]
    med = statistics.median(s)
    print(f"| {name} | {med:.2f} ({min(s):.2f}-{max(s):.2f}) | {base / med:.2f}x | "
          f"{window / med:.2f}x | {dice(masks[name], masks[two]):.4f} "
          f"| {dice(masks[name], brain):.4f} |")
diff = float(np.abs(outputs["tandem 1 device (2 threads)"] -
                   outputs["PyTorch whole volume, no_grad"]).max())
print()
print(f"tandem's probabilities against PyTorch's whole forward: largest difference {diff:.2e}.")
