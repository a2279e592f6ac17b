"""--normalize on npy:DIR against PyTorch's own training on the same arrays.

    npy_normalize_check.py write DIR
        writes DIR/train_x.npy (12,3,4) float32 of mean 5 and deviation 3, far from standardized,
        train_y (12,) int64 labels 0..4, and test_x/test_y of 6 samples
    npy_normalize_check.py check DIR STATE.pt MODE
        MODE none: PyTorch trains torch_models' mlp on the arrays as stored; dataset: on train_x
        standardized with its own mean and deviation (n - 1), in double, then float32. Each step
        is the whole training set (batch 12): SGD, learning rate 0.1, 3 steps. tandem's
        consolidated STATE.pt must equal it within 1e-5 of each tensor's largest magnitude (the
        tolerance of check_training.py: float32, sums reordered across micro-batches), and the
        other MODE's reference must differ by more than 1e-3 (the choice matters here).
    npy_normalize_check.py perturb DIR
        rewrites train_x as 3 x + 1: a checkpoint's recorded moments must not follow it
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def reference(folder, mode):
    x = np.load(os.path.join(folder, "train_x.npy"))
    y = torch.from_numpy(np.load(os.path.join(folder, "train_y.npy")))
    if mode == "dataset":
        x64 = x.astype(np.float64)
        x = ((x64 - x64.mean()) / x64.std(ddof=1)).astype(np.float32)
    model = torch_models.build("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(torch.from_numpy(x)), y).backward()
        opt.step()
    return model.state_dict()


def largest_difference(got, want):
    worst = 0.0
    for key, w in want.items():
        scale = max(w.abs().max().item(), 1e-12)
        worst = max(worst, (got[key] - w).abs().max().item() / scale)
    return worst


command, folder = sys.argv[1], sys.argv[2]
if command == "write":
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(5)
    for split, n in (("train", 12), ("test", 6)):
        np.save(os.path.join(folder, f"{split}_x.npy"),
                (5 + 3 * rng.standard_normal((n, 3, 4))).astype(np.float32))
        np.save(os.path.join(folder, f"{split}_y.npy"), rng.integers(0, 5, n).astype(np.int64))
elif command == "perturb":
    path = os.path.join(folder, "train_x.npy")
    np.save(path, (3 * np.load(path) + 1).astype(np.float32))
elif command == "check":
    state, mode = torch.load(sys.argv[3]), sys.argv[4]
    other = {"none": "dataset", "dataset": "none"}[mode]
    same = largest_difference(state, reference(folder, mode))
    differs = largest_difference(state, reference(folder, other))
    print(f"--normalize {mode}: {same:.3g} from PyTorch on the same inputs, {differs:.3g} from "
          f"PyTorch on the inputs of --normalize {other}")
    if same > 1e-5:
        sys.exit(f"tandem's weights differ from PyTorch's by {same:.3g} (> 1e-5)")
    if differs <= 1e-3:
        sys.exit(f"the reference of --normalize {other} is as close ({differs:.3g}): the test "
                 "cannot tell the modes apart")
else:
    sys.exit(f"unknown command {command}")
