"""close_weights.py A.pt B.pt TOL: exit 0 when two consolidated state dicts hold the same
tensor names and shapes and every tensor agrees within TOL of its largest magnitude; 1 with
the worst tensor named otherwise. For runs whose sums are ordered differently (a spatial split
sums a weight gradient per slab, then over the slabs), where bitwise equality is not promised."""
import sys

import torch

a, b, tol = torch.load(sys.argv[1]), torch.load(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b):
    sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
worst, name = 0.0, ""
for k in a:
    if a[k].shape != b[k].shape:
        sys.exit(f"{k}: shapes {tuple(a[k].shape)} and {tuple(b[k].shape)}")
    scale = float(a[k].abs().max().clamp(min=1e-12))
    rel = float((a[k] - b[k]).abs().max()) / scale
    if rel > worst:
        worst, name = rel, k
print(f"largest relative difference {worst:.3g} ({name})")
sys.exit(1 if worst > tol else 0)
