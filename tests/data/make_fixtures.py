#!/usr/bin/env python3
"""Writes the data files tandem's tests read, with numpy and nibabel (Debian's python3-numpy and
python3-nibabel), so the readers are checked against files other libraries wrote.

  make_fixtures.py npy OUT      OUT/<dtype>.npy for each dtype tandem reads, OUT/bad_*.npy
  make_fixtures.py nifti2 OUT   OUT/ramp_v2.nii (float32) and OUT/ramp_v2_int16.nii.gz (int16,
                                scl_slope 0.5, scl_inter 10): NIfTI-2 volumes [Z,Y,X] = [2,3,4]
                                whose voxel (i,j,k) holds 12k + 4j + i (stored: the int16 one
                                reads as that * 0.5 + 10), spacing 0.5, 2, 3
  make_fixtures.py folders OUT  folders for training runs through the command line:
      OUT/ch2/          the mricron T1 MRI as a one-pair NIfTI folder (mask = ch2bet > 0)
      OUT/multi/        4D two-channel int16 images with a scaling slope, 3 pairs
      OUT/multiclass/   a label holding 0, 1, 2 and 4
      OUT/truncated/    an image cut short
      OUT/unpaired/     an image without its label
      OUT/npy_mlp/, OUT/npy_unet/, OUT/npy_conv/   arrays for the three models
      OUT/npy_bad_shape/, OUT/npy_bad_label/, OUT/npy_bad_header/

Every array is a fixed function of its index (no randomness), so reruns write the same bytes.
"""
import gzip
import os
import shutil
import struct
import sys

import nibabel as nib
import numpy as np

CH2 = "/usr/share/mricron/templates"


def npy_with_header(path, header, payload=b"", version=(1, 0)):
    """An npy file with a hand-made header dict (to make malformed ones)."""
    text = header.encode("latin1")
    if version[0] == 1:
        lead = b"\x93NUMPY" + bytes(version) + struct.pack("<H", len(text))
    else:
        lead = b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(text))
    with open(path, "wb") as f:
        f.write(lead + text + payload)


def write_npy(out):
    os.makedirs(out, exist_ok=True)
    base = np.arange(24).reshape(2, 3, 4)
    np.save(f"{out}/float32.npy", (base * 0.25 - 3).astype("<f4"))
    np.save(f"{out}/float64.npy", (base * 0.125 + 1e-3).astype("<f8"))
    np.save(f"{out}/uint8.npy", (base * 10 + 5).astype("|u1"))
    np.save(f"{out}/int64.npy", (base * 1000000007 - 5).astype("<i8"))
    np.save(f"{out}/vector.npy", np.arange(5, dtype="<i8"))
    np.save(f"{out}/scalar.npy", np.array(2.5, dtype="<f8"))
    np.save(f"{out}/empty.npy", np.zeros((0, 3), dtype="<f4"))
    # Version 2.0, as numpy writes for headers over 65535 bytes; here forced.
    np.lib.format.write_array(open(f"{out}/version2.npy", "wb"), base.astype("<f4"), version=(2, 0))
    # A header length whose low byte is >= 128 (182 = 0xb6: a 23-dim shape).
    np.save(f"{out}/long_header.npy", base.astype("<f4").reshape((1,) * 20 + (2, 3, 4)))
    # Malformed ones.
    with open(f"{out}/bad_magic.npy", "wb") as f:
        f.write(b"PK\x03\x04 this is a zip, not an npy file")
    good = open(f"{out}/float32.npy", "rb").read()
    open(f"{out}/bad_truncated.npy", "wb").write(good[:-5])
    open(f"{out}/bad_longer.npy", "wb").write(good + b"\0" * 4)
    npy_with_header(f"{out}/bad_version.npy", "{}\n", version=(9, 0))
    np.save(f"{out}/bad_int32.npy", base.astype("<i4"))
    np.save(f"{out}/bad_big_endian.npy", base.astype(">f4"))
    np.save(f"{out}/bad_fortran.npy", np.asfortranarray(base.astype("<f4")))
    payload = base.astype("<f4").tobytes()
    npy_with_header(f"{out}/bad_no_shape.npy", "{'descr': '<f4', 'fortran_order': False, }\n", payload)
    npy_with_header(f"{out}/bad_syntax.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }\n", payload)
    npy_with_header(f"{out}/bad_header_length.npy", "{'descr': '<f4'" + " " * 10, b"")
    with open(f"{out}/bad_header_length.npy", "r+b") as f:  # claims 60000 header bytes
        f.seek(8)
        f.write(struct.pack("<H", 60000))


def save_nifti(path, data, dtype=None, slope=None, inter=0.0):
    """data [X,Y,Z] or [X,Y,Z,C] (nibabel's order); with a slope the file stores ints."""
    img = nib.Nifti1Image(data, np.eye(4))
    if dtype is not None:
        img.set_data_dtype(dtype)
    if slope is not None:
        img.header.set_slope_inter(slope, inter)
    nib.save(img, path)


def pair_folder(out, name):
    d = f"{out}/{name}"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(f"{d}/images")
    os.makedirs(f"{d}/labels")
    return d


def phantom(shape, shift):
    """An ellipsoid foreground (the label) on a ramp background, [X,Y,Z] in nibabel's order."""
    x, y, z = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    c = [n / 2 + shift for n in shape]
    inside = ((x - c[0]) / (shape[0] / 3)) ** 2 + ((y - c[1]) / (shape[1] / 3)) ** 2 + \
        ((z - c[2]) / (shape[2] / 3)) ** 2 <= 1
    image = 10.0 * inside + 0.1 * (x + y + z)
    return image, inside.astype(np.uint8)


def write_folders(out):
    os.makedirs(out, exist_ok=True)
    # The MRI, as a one-pair folder: the image as it is, the label a 0/1 mask of the brain.
    d = pair_folder(out, "ch2")
    shutil.copy(f"{CH2}/ch2.nii.gz", f"{d}/images/ch2.nii.gz")
    bet = nib.load(f"{CH2}/ch2bet.nii.gz")
    mask = (np.asanyarray(bet.dataobj) > 0).astype(np.uint8)
    nib.save(nib.Nifti1Image(mask, bet.affine), f"{d}/labels/ch2.nii.gz")

    # Two-channel 4D images stored as int16 with a scaling slope; labels uint8 0/1.
    d = pair_folder(out, "multi")
    for i, shape in enumerate([(20, 18, 17), (18, 20, 16), (17, 17, 17)]):
        image, label = phantom(shape, i)
        both = np.stack([image, 20 - image], axis=-1)  # [X,Y,Z,2]
        save_nifti(f"{d}/images/case{i}.nii.gz", both, np.int16, slope=0.01, inter=-5.0)
        save_nifti(f"{d}/labels/case{i}.nii.gz", label)

    d = pair_folder(out, "multiclass")
    image, label = phantom((16, 16, 16), 0)
    label = label.astype(np.int16)
    label[0, 0, :4] = [2, 4, 2, 1]
    save_nifti(f"{d}/images/a.nii", image.astype(np.float32))
    save_nifti(f"{d}/labels/a.nii", label)

    d = pair_folder(out, "truncated")
    save_nifti(f"{d}/images/a.nii", image.astype(np.float32))
    save_nifti(f"{d}/labels/a.nii", phantom((16, 16, 16), 0)[1])
    data = open(f"{d}/images/a.nii", "rb").read()
    open(f"{d}/images/a.nii", "wb").write(data[: len(data) - 1000])

    d = pair_folder(out, "unpaired")
    save_nifti(f"{d}/images/a.nii", image.astype(np.float32))
    save_nifti(f"{d}/images/b.nii", image.astype(np.float32))
    save_nifti(f"{d}/labels/a.nii", phantom((16, 16, 16), 0)[1])

    # Arrays: 3 classes of 6x6 images for the mlp (uint8 pixels, int64 labels).
    def npy_dir(name):
        p = f"{out}/{name}"
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(p)
        return p

    p = npy_dir("npy_mlp")
    for split, n in (("train", 48), ("test", 12)):
        k = np.arange(n)
        y = (k % 3).astype("<i8")
        x = ((k[:, None, None] % 3) * 80 + np.arange(36).reshape(1, 6, 6)).astype("|u1")
        np.save(f"{p}/{split}_x.npy", x)
        np.save(f"{p}/{split}_y.npy", y)
    # Volumes for the U-Net: (N, D, H, W) float32 inputs, (N, D, H, W) uint8 masks.
    p = npy_dir("npy_unet")
    for split, n in (("train", 8), ("test", 4)):
        xs, ys = zip(*[phantom((8, 8, 8), k % 3 - 1) for k in range(n)])
        np.save(f"{p}/{split}_x.npy", np.stack(xs).astype("<f4"))
        np.save(f"{p}/{split}_y.npy", np.stack(ys).astype("|u1"))
    # Two-channel float64 volumes with real targets (N, 1, D, H, W) for the Conv3D stack.
    p = npy_dir("npy_conv")
    for split, n in (("train", 8), ("test", 4)):
        xs = np.stack([np.stack([phantom((6, 7, 5), k)[0], np.full((6, 7, 5), k)]) for k in range(n)])
        np.save(f"{p}/{split}_x.npy", xs.astype("<f8"))
        np.save(f"{p}/{split}_y.npy", xs[:, :1].astype("<f4") * 0.5)
    # Bad ones: labels of shape (N, 1) for the mlp; a label 7 with 3 classes; a bad header.
    p = npy_dir("npy_bad_shape")
    np.save(f"{p}/train_x.npy", np.zeros((10, 4), "<f4"))
    np.save(f"{p}/train_y.npy", np.zeros((10, 1), "<i8"))
    p = npy_dir("npy_bad_label")
    np.save(f"{p}/train_x.npy", np.zeros((10, 4), "<f4"))
    np.save(f"{p}/train_y.npy", np.array([0, 1, 2, 7, 0, 1, 2, 0, 1, 2], "<i8"))
    p = npy_dir("npy_bad_header")
    np.save(f"{p}/train_x.npy", np.zeros((10, 4), "<f4"))
    data = open(f"{p}/train_x.npy", "rb").read()
    open(f"{p}/train_y.npy", "wb").write(data.replace(b"'descr'", b"'dexcr'"))


def write_nifti2(out):
    os.makedirs(out, exist_ok=True)
    ramp = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose()  # [X,Y,Z]
    affine = np.diag([0.5, 2.0, 3.0, 1.0])
    nib.save(nib.Nifti2Image(ramp, affine), f"{out}/ramp_v2.nii")
    img = nib.Nifti2Image(ramp, affine)
    img.set_data_dtype(np.int16)
    img.header.set_slope_inter(0.5, 10.0)
    nib.save(img, f"{out}/ramp_v2_int16.nii.gz")


def main():
    writers = {"npy": write_npy, "nifti2": write_nifti2, "folders": write_folders}
    if len(sys.argv) != 3 or sys.argv[1] not in writers:
        sys.exit(__doc__)
    writers[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
