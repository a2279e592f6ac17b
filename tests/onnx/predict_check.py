"""tandem predict as a user runs it, checked against PyTorch and nibabel.

Usage: predict_check.py TANDEM WORKDIR [MPIRUN...]

1. A PyTorch 3D U-Net (instance norm, transposed convolution, concatenated skip, final sigmoid)
   exported to ONNX with dynamic D, H, W; a NIfTI scan of an odd grid (13 x 10 x 9 voxels, not
   a multiple of the pooling) with a rotated affine, voxel sizes and qform and sform. tandem
   predict on 1 device, on 2 and 3 slabs (uneven), on 2 stages and on 2 stages of 2 slabs gives
   PyTorch's forward of the standardized scan padded with zeros to 14 x 10 x 10, cropped back
   (within 1e-5); nibabel reads every result on the scan's grid (shape, affine, zooms, qform,
   sform). The mask is the probabilities at the threshold.
   With MPIRUN (the launcher and its flags): the same under `MPIRUN -n 2`, one stage or one slab
   per rank.
2. .npy in and out, a folder of scans to a folder of results.
3. Sliding windows against a NumPy implementation of the documented placement and weights
   (PyTorch's forward of each window): gaussian and constant blending, a batch of windows, test-
   time mirroring, windows split into slabs; a model exported for one fixed size is predicted by
   windows of that size, and says so.
4. The forward's memory plan against the measured peaks; a scan over its budget refused with
   status 3 before work, and predicted by the largest windows that fit under --window auto.
5. Images (an ONNX classifier): .npy in, CSV and .npy out, against PyTorch's softmax; the
   accuracy against a file of labels.
6. Refusals with status 2 before any work: NaN voxels, an output folder equal to the input
   folder, an input folder without scans, a NIfTI output for a .npy scan, no weights for a
   built-in model, micro-batches.
"""
import os
import subprocess
import sys

import nibabel as nib
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

tandem, work, mpirun = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(work, exist_ok=True)


def run(*args, status=0, launcher=()):
    done = subprocess.run([*launcher, tandem, "predict", *args], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != status:
        sys.exit(f"tandem predict {' '.join(args)}: status {done.returncode}, expected {status}\n"
                 f"{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def same(got, want, what, tol=1e-5):
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
    if got.shape != want.shape or not err <= tol:
        sys.exit(f"{what}: shape {got.shape} vs {want.shape}, largest relative difference {err}")
    print(f"ok {what}: largest relative difference {err:.2e}")


# The model and its ONNX file.
torch.manual_seed(3)
model = torch_models.Unet3d().eval()
onnx_path = os.path.join(work, "unet.onnx")
torch_models.export_volume_model(model, onnx_path)

# A scan of an odd grid with a rotated, scaled, shifted affine.
rng = np.random.default_rng(5)
scan = (rng.standard_normal((9, 10, 13)) * 40 + 300).astype(np.float32)  # x, y, z
theta = 0.3
affine = np.array([[1.2 * np.cos(theta), -0.9 * np.sin(theta), 0, -40.5],
                   [1.2 * np.sin(theta), 0.9 * np.cos(theta), 0, 12.25],
                   [0, 0, 2.0, 7.0],
                   [0, 0, 0, 1]])
image = nib.Nifti1Image(scan, affine)
image.set_qform(affine, code=1)
image.set_sform(affine, code=2)
scan_path = os.path.join(work, "scan.nii.gz")
nib.save(image, scan_path)

# PyTorch's forward on the scan as tandem standardizes (per channel, deviation with n - 1) and
# pads it (zeros after the last plane of each axis, to a multiple of the pooling factor 2).
zyx = np.asarray(nib.load(scan_path).dataobj, dtype=np.float64).transpose(2, 1, 0)
x = (zyx - zyx.mean()) / zyx.std(ddof=1)
x = torch.from_numpy(x.astype(np.float32))[None, None]
x = F.pad(x, (0, 10 - 9, 0, 10 - 10, 0, 14 - 13))
with torch.no_grad():
    want = model(x)[0, 0, :13, :10, :9].numpy()

common = ["--model", onnx_path, "--loss", "dice", "--input", scan_path]
layouts = {"1 device": ["--devices", "1"],
           "2 slabs": ["--devices", "2", "--spatial", "2"],
           "3 slabs (uneven)": ["--devices", "3", "--spatial", "3"],
           "2 stages": ["--devices", "2", "--stages", "2"],
           "2 stages of 2 slabs": ["--devices", "4", "--stages", "2", "--spatial", "2"]}
for name, layout in layouts.items():
    out = os.path.join(work, f"p_{name.split()[0]}_{len(layout)}.nii.gz")
    text = run(*common, *layout, "--output", out)
    if "result: file=" not in text or "padded=14x10x10" not in text:
        sys.exit(f"{name}: no result line with the padded grid:\n{text}")
    written = nib.load(out)
    if not (written.shape == image.shape and np.allclose(written.affine, affine)
            and np.allclose(written.header.get_zooms(), image.header.get_zooms())
            and np.allclose(written.get_qform(), affine) and np.allclose(written.get_sform(), affine)
            and int(written.header["qform_code"]) == 1 and int(written.header["sform_code"]) == 2):
        sys.exit(f"{name}: written grid {written.shape} {written.affine} differs from the scan's")
    got = np.asarray(written.dataobj, dtype=np.float32).transpose(2, 1, 0)
    same(got, want, f"predict on {name} against PyTorch")

for name, layout, writer in (("2 stages", [], "[r1/2]"), ("2 slabs", ["--spatial", "2"], "[r0/2]")):
    if not mpirun:
        break
    out = os.path.join(work, f"p_mpi_{len(layout)}.nii.gz")
    text = run(*common, *layout, "--output", out, launcher=[*mpirun, "-n", "2"])
    if f"{writer} result: file=" not in text:
        sys.exit(f"under mpirun ({name}): {writer} wrote no result line:\n{text}")
    got = np.asarray(nib.load(out).dataobj, dtype=np.float32).transpose(2, 1, 0)
    same(got, want, f"predict under mpirun -n 2 ({name}, one per rank) against PyTorch")

# The mask of one sigmoid output: the probabilities at the threshold (the median, so that both
# values occur).
threshold = float(np.round(np.median(want), 4))
mask_path = os.path.join(work, "mask.nii.gz")
run(*common, "--devices", "2", "--spatial", "2", "--output", mask_path, "--output-kind", "mask",
    "--threshold", str(threshold))
mask = np.asarray(nib.load(mask_path).dataobj).transpose(2, 1, 0)
if nib.load(mask_path).get_data_dtype() != np.uint8:
    sys.exit("the mask is not uint8")
near = np.abs(want - threshold) < 1e-5
if not np.array_equal(mask[~near], (want >= threshold)[~near]) or not 0 < mask.sum() < mask.size:
    sys.exit(f"the mask differs from the probabilities at --threshold {threshold}")
print(f"ok mask at {threshold}: {int(mask.sum())} of {mask.size} voxels")

# .npy in and out: [D,H,W] scans, a folder to a folder.
folder = os.path.join(work, "scans")
os.makedirs(folder, exist_ok=True)
np.save(os.path.join(folder, "a.npy"), zyx.astype(np.float32))
np.save(os.path.join(folder, "b.npy"), zyx[:, :8, :8].astype(np.float32))
results = os.path.join(work, "results")
text = run("--model", onnx_path, "--loss", "dice", "--devices", "2", "--spatial", "2", "--input",
           folder, "--output", results)
same(np.load(os.path.join(results, "a.npy")), want, ".npy scan in a folder against PyTorch")
if np.load(os.path.join(results, "b.npy")).shape != (13, 8, 8):
    sys.exit("b.npy: the result is not on the scan's grid")

# --labels: each file's Dice of the mask at --threshold against label > 0, and their mean.
labels = os.path.join(work, "labels")
os.makedirs(labels, exist_ok=True)
label_a = (want > threshold + 0.01).astype(np.uint8)  # close to the mask, not equal
label_b = rng.integers(0, 2, (13, 8, 8)).astype(np.float32)
np.save(os.path.join(labels, "a.npy"), label_a)
np.save(os.path.join(labels, "b.npy"), label_b)
text = run("--model", onnx_path, "--loss", "dice", "--input", folder, "--output", results,
           "--labels", labels, "--threshold", str(threshold))


def dice(mask, label):
    return 2 * np.logical_and(mask, label > 0).sum() / (mask.sum() + (label > 0).sum())


dices = [dice(np.load(os.path.join(results, n)) >= threshold, lab)
         for n, lab in (("a.npy", label_a), ("b.npy", label_b))]
for n, d in zip(("a.npy", "b.npy"), dices):
    if f"{n} " not in text.replace(f"{n} shape", f"{n} ") or f"dice={d:.4f}" not in text:
        sys.exit(f"--labels: no dice={d:.4f} for {n}:\n{text}")
if f"mean: files=2 dice={np.mean(dices):.4f}" not in text:
    sys.exit(f"--labels: no mean dice {np.mean(dices):.4f}:\n{text}")
print(f"ok --labels: Dice {dices[0]:.4f}, {dices[1]:.4f}, mean {np.mean(dices):.4f}")

# Sliding windows, computed here as docs/predict.md describes them.
xs = ((zyx - zyx.mean()) / zyx.std(ddof=1)).astype(np.float32)  # standardized, not padded


def starts(size, window, overlap):
    step = max(1, int(np.floor(window * (1 - overlap) + 1e-9)))
    count = -(-(size - window) // step) + 1
    return [min(i * step, size - window) for i in range(count)]


def weights(window, blend):
    axes = []
    for n in window:
        i = np.arange(n, dtype=np.float64)
        axes.append(np.ones(n) if blend == "constant"
                    else np.exp(-(i - (n - 1) / 2) ** 2 / (2 * (n / 8) ** 2)))
    return axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]


def sliding(net, window, overlap, blend, mirror=()):
    total, norm = np.zeros(xs.shape), np.zeros(xs.shape)
    w = weights(window, blend)
    flips = [[a + 2 for a, bit in zip(mirror, range(len(mirror))) if m >> bit & 1]
             for m in range(2 ** len(mirror))]
    for a in starts(xs.shape[0], window[0], overlap):
        for b in starts(xs.shape[1], window[1], overlap):
            for c in starts(xs.shape[2], window[2], overlap):
                part = (slice(a, a + window[0]), slice(b, b + window[1]), slice(c, c + window[2]))
                t = torch.from_numpy(np.ascontiguousarray(xs[part]))[None, None]
                with torch.no_grad():
                    y = sum(net(t.flip(f) if f else t).flip(f)[0, 0].double().numpy() if f
                            else net(t)[0, 0].double().numpy() for f in flips) / len(flips)
                total[part] += y * w
                norm[part] += w
    return total / norm


window_runs = [
    ("gaussian, overlap 0.5, 2 windows a batch, 2 slabs",
     ["--window", "8", "--overlap", "0.5", "--window-batch", "2", "--devices", "2", "--spatial",
      "2"], (8, 8, 8), 0.5, "gaussian", ()),
    ("constant, overlap 0.25, 1 device", ["--window", "6,8,4", "--blend", "constant"], (6, 8, 4),
     0.25, "constant", ()),
    ("gaussian, mirrored along D and W, 2 stages",
     ["--window", "8,6,6", "--mirror", "D,W", "--devices", "2", "--stages", "2"], (8, 6, 6), 0.25,
     "gaussian", (0, 2)),
]
for name, args, window, overlap, blend, mirror in window_runs:
    out = os.path.join(work, "w.npy")
    text = run("--model", onnx_path, "--loss", "dice", "--input", os.path.join(folder, "a.npy"),
               "--output", out, *args)
    if "windows=" not in text:
        sys.exit(f"windows ({name}): the result line does not count the windows:\n{text}")
    same(np.load(out), sliding(model, window, overlap, blend, mirror).astype(np.float32),
         f"windows ({name}) against NumPy")

fixed_path = os.path.join(work, "unet_fixed.onnx")
torch_models.export_volume_model(model, fixed_path, fixed=(8, 8, 8))
text = run("--model", fixed_path, "--loss", "dice", "--input", os.path.join(folder, "a.npy"),
           "--output", os.path.join(work, "f.npy"))
if "only (exported with fixed spatial axes): predicting by windows" not in text:
    sys.exit(f"a model of a fixed size: no line saying it is predicted by windows:\n{text}")
same(np.load(os.path.join(work, "f.npy")),
     sliding(model, (8, 8, 8), 0.25, "gaussian").astype(np.float32),
     "a fixed-size export, by windows of its size, against NumPy")

# The forward's plan under --device-memory: at least the measured peak of every device, within
# 10%; under a budget below it, status 3 before any work, naming what would fit; --window auto
# then predicts by the windows it names.
import re  # noqa: E402

big = np.tile(zyx.astype(np.float32), (3, 3, 3))  # 39 x 30 x 27
np.save(os.path.join(work, "big.npy"), big)
big_args = ["--model", onnx_path, "--loss", "dice", "--input", os.path.join(work, "big.npy"),
            "--output", os.path.join(work, "big_p.npy")]
for layout in (["--devices", "1"], ["--devices", "2", "--spatial", "2"],
               ["--devices", "2", "--stages", "2"]):
    text = run(*big_args, *layout, "--device-memory", "4GiB")
    planned = int(re.search(r"planned_peak=(\d+)", text).group(1))
    measured = max(int(v) for v in re.findall(r"peak_mem_\S+=(\d+)", text))
    if not measured <= planned <= 1.1 * measured:
        sys.exit(f"{layout}: the forward planned {planned} bytes, measured {measured}")
    print(f"ok the forward's plan on {' '.join(layout)}: {planned / measured:.3f} of the peak")
text = run(*big_args, "--devices", "1", "--device-memory", "4GiB")
budget = int(int(re.search(r"planned_peak=(\d+)", text).group(1)) * 0.6)
text = run(*big_args, "--devices", "1", "--device-memory", str(budget), status=3)
if "plans" not in text or "would plan" not in text or "result:" in text:
    sys.exit(f"over the budget: no refusal naming what fits:\n{text}")
text = run(*big_args, "--devices", "1", "--device-memory", str(budget), "--window", "auto")
if "by windows of" not in text or "windows=" not in text:
    sys.exit(f"--window auto under the budget:\n{text}")
print("ok a forward over its budget: refused before work; --window auto predicts by windows")

# Images: an ONNX classifier on a .npy of images, CSV and .npy out, --labels as a file.
classifier = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.ReLU(),
                                 torch.nn.Linear(8, 3)).eval()
classifier_path = os.path.join(work, "classifier.onnx")
torch.onnx.export(classifier, torch.randn(2, 1, 4, 4), classifier_path, opset_version=13,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
pictures = rng.standard_normal((11, 1, 4, 4)).astype(np.float32) * 3 + 1
np.save(os.path.join(work, "pictures.npy"), pictures)
standardized = (pictures - pictures.astype(np.float64).mean()) / pictures.astype(np.float64).std(ddof=1)
with torch.no_grad():
    probabilities = torch.softmax(classifier(torch.from_numpy(standardized.astype(np.float32))),
                                  1).numpy()
classes = probabilities.argmax(1)
truth = classes.copy()
truth[:3] = (truth[:3] + 1) % 3  # 8 of 11 right
np.save(os.path.join(work, "truth.npy"), truth.astype(np.int64))
for layout in (["--devices", "1"], ["--devices", "2", "--stages", "2"]):
    csv = os.path.join(work, "pictures.csv")
    text = run("--model", classifier_path, "--loss", "cross-entropy", "--input",
               os.path.join(work, "pictures.npy"), "--output", csv, "--batch", "4",
               "--labels", os.path.join(work, "truth.npy"), *layout)
    if f"images=11" not in text or f"accuracy={8 / 11:.4f}" not in text:
        sys.exit(f"images on {layout}: no result line with the accuracy {8 / 11:.4f}:\n{text}")
    header, *rows = open(csv).read().splitlines()
    if header != "class_0,class_1,class_2" or len(rows) != 11:
        sys.exit(f"images: the CSV is not one row per image under class columns:\n{header}")
    same(np.array([[float(v) for v in r.split(",")] for r in rows], dtype=np.float32),
         probabilities, f"images on {' '.join(layout)}: the CSV against PyTorch's softmax")
run("--model", classifier_path, "--loss", "cross-entropy", "--input",
    os.path.join(work, "pictures.npy"), "--output", os.path.join(work, "classes.npy"),
    "--output-kind", "labels")
if not np.array_equal(np.load(os.path.join(work, "classes.npy")), classes):
    sys.exit("images: the labels written are not the most probable classes")
print("ok images: probabilities as CSV, labels as .npy, the accuracy against --labels")

# Refusals, status 2, before any work.
bad_labels = os.path.join(work, "bad_labels")
os.makedirs(bad_labels, exist_ok=True)
np.save(os.path.join(bad_labels, "a.npy"), label_a[:, :, :8])
np.save(os.path.join(bad_labels, "b.npy"), label_b)
bad = zyx.astype(np.float32).copy()
bad[3, 4, 5] = np.nan
np.save(os.path.join(work, "nan.npy"), bad)
checks = [
    (["--input", os.path.join(work, "nan.npy"), "--output", os.path.join(work, "n.npy")],
     "NaN or infinite"),
    (["--input", folder, "--output", folder], "is the input folder"),
    (["--input", os.path.join(work, "empty"), "--output", os.path.join(work, "e")],
     "holds no scan"),
    (["--input", os.path.join(folder, "a.npy"), "--output", os.path.join(work, "a.nii")],
     "a NIfTI result needs a NIfTI scan"),
    (["--input", scan_path, "--output", out, "--microbatches", "2"], "--microbatches"),
    (["--input", scan_path, "--output", out, "--window", "16"], "larger than the scan"),
    (["--input", scan_path, "--output", out, "--window", "7"], "not a multiple of 2"),
    (["--input", scan_path, "--output", out, "--window", "4,4"], "one side or three"),
    (["--input", scan_path, "--output", out, "--mirror", "X"], "axes to flip"),
    (["--input", scan_path, "--output", out, "--window", "auto"], "give --device-memory"),
    (["--input", scan_path, "--output", out, "--labels", labels], "no label for"),
    (["--input", folder, "--output", results, "--labels", bad_labels], "the label has shape"),
]
os.makedirs(os.path.join(work, "empty"), exist_ok=True)
for args, words in checks:
    text = run("--model", onnx_path, "--loss", "dice", *args, status=2)
    if words not in text:
        sys.exit(f"{args}: the message does not say '{words}':\n{text}")
text = run("--model", "unet3d", "--input", scan_path, "--output", out, status=2)
if "needs --checkpoint" not in text:
    sys.exit(f"a built-in model without weights:\n{text}")
print("ok refusals")
