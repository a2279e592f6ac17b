"""A picture of a predicted mask over its scan: one axial, one coronal and one sagittal slice
through the middle of the mask, the scan in grey and the mask in red, side by side, as a PNG.

Usage: predict_picture.py SCAN.nii.gz MASK.nii.gz OUT.png
"""
import sys

import nibabel as nib
import numpy as np
from PIL import Image

scan_path, mask_path, out_path = sys.argv[1:4]
scan = np.asarray(nib.as_closest_canonical(nib.load(scan_path)).dataobj, dtype=np.float64)
mask = np.asarray(nib.as_closest_canonical(nib.load(mask_path)).dataobj) > 0
if scan.shape != mask.shape:
    sys.exit(f"the scan {scan.shape} and the mask {mask.shape} are not on one grid")
# RAS order after as_closest_canonical: x (left to right), y (back to front), z (foot to head).
x, y, z = (int(round(c)) for c in np.argwhere(mask).mean(0))
low, high = np.percentile(scan[scan > 0], [1, 99])
grey = np.clip((scan - low) / (high - low), 0, 1)


def slice_rgb(g, m):
    """[rows, cols] grey and mask -> [rows, cols, 3] uint8, the mask half red."""
    rgb = np.stack([g, g, g], -1)
    rgb[m] = 0.5 * rgb[m] + 0.5 * np.array([1.0, 0.1, 0.1])
    return (rgb * 255).astype(np.uint8)


# Each slice with up at the top: the array's second axis runs upwards after the transpose.
views = [slice_rgb(grey[:, :, z].T[::-1], mask[:, :, z].T[::-1]),   # axial: front at the top
         slice_rgb(grey[:, y, :].T[::-1], mask[:, y, :].T[::-1]),   # coronal
         slice_rgb(grey[x, :, :].T[::-1], mask[x, :, :].T[::-1])]   # sagittal
height = max(v.shape[0] for v in views)
canvas = np.zeros((height, sum(v.shape[1] for v in views) + 2 * 4, 3), np.uint8)
at = 0
for v in views:
    canvas[:v.shape[0], at:at + v.shape[1]] = v
    at += v.shape[1] + 4
Image.fromarray(canvas).save(out_path)
print(f"{out_path}: slices x={x} y={y} z={z} of {scan.shape}, {int(mask.sum())} mask voxels")
