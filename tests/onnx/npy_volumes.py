"""Writes an npy:DIR folder of volumes with real targets (a regression of voxel maps, as a user
brings a Conv3D model with mean squared error): train_x/train_y (8,1,8,8,8) and test_x/test_y
(4,1,8,8,8), float32.

Usage: npy_volumes.py DIR
"""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
for split, n in (("train", 8), ("test", 4)):
    x = rng.standard_normal((n, 1, 8, 8, 8)).astype(np.float32)
    np.save(os.path.join(out, f"{split}_x.npy"), x)
    np.save(os.path.join(out, f"{split}_y.npy"), (0.5 * x + 0.1).astype(np.float32))
