"""python3 check_training.py NAME STATE.pt: loads tandem's consolidated state dict into the
PyTorch module NAME of torch_models.py and compares it with PyTorch's own training from the
same initial weights on the same batches.

Tolerance 1e-5 of each tensor's largest magnitude: float32 throughout; tandem sums a batch's
gradient over micro-batches (and stages send activations and gradients between devices)
where PyTorch computes it at once, so sums are reordered: a relative error of a few 1e-7 per
step, over the 3 steps of learning rate 0.1 of these models. Counters (num_batches_tracked)
must be equal.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

name, state = sys.argv[1], sys.argv[2]
worst = torch_models.check_training(name, state)
print(f"{name}: largest difference {worst:.3g} of a tensor's largest magnitude")
if worst > 1e-5:
    sys.exit(f"{name}: tandem's weights differ from PyTorch's by {worst:.3g} (> 1e-5)")
