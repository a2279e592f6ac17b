#!/usr/bin/env bash
# The memory plan against the measured peak for a user's ONNX model: the PyTorch U-Net of
# tests/onnx/torch_models.py (PlanUnet: 8, 16, 32, 64 filters, transposed convolutions,
# concatenated skips, sigmoid; 350,457 parameters), exported with Debian's python3-torch, trained
# on 64^3 crops of a NIfTI folder (the MRI of Debian's mricron-data and its brain mask), batch 2,
# one micro-batch, two steps (the optimizer's state exists from the first step on). Prints a
# Markdown table (tests/onnx/plan_check.py's lines) with the commands.
# Usage: bench/memory-onnx.sh BUILD_DIR [PYTHON]
set -euo pipefail
build=${1:-build}
python=${2:-/usr/bin/python3}
tandem="$build/tandem"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - "$here/../tests/onnx" "$work" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import nibabel as nib, numpy as np, torch, torch_models
work = sys.argv[2]
torch.manual_seed(11)
torch_models.export_volume_model(torch_models.PlanUnet(), os.path.join(work, "unet.onnx"))
for d in ("images", "labels"):
    os.makedirs(os.path.join(work, "mri", d))
t = "/usr/share/mricron/templates/"
nib.save(nib.load(t + "ch2.nii.gz"), os.path.join(work, "mri", "images", "ch2.nii.gz"))
mask = nib.load(t + "ch2bet.nii.gz")
nib.save(nib.Nifti1Image((np.asanyarray(mask.dataobj) > 0).astype(np.uint8), mask.affine),
         os.path.join(work, "mri", "labels", "ch2.nii.gz"))
PY

train=(--model "$work/unet.onnx" --loss dice+bce --data "nifti:$work/mri" --test-files 0
  --volume 64 --batch 2 --microbatches 1 --train-samples 4 --test-samples 0 --seed 0)
echo "Each layout: \`$tandem train --model unet.onnx --loss dice+bce --data nifti:mri --test-files 0"
echo "--volume 64 --batch 2 --microbatches 1 --train-samples 4 --test-samples 0 --seed 0 LAYOUT\`"
echo "with \`--plan-only\` (the plan: planned peak and at most, per stage) and with \`--steps 2\`"
echo "(the measured peak of the stage's devices); \`python3 tests/onnx/plan_check.py\` compares them."
echo
echo "| LAYOUT | stage | planned MiB | at most MiB | measured MiB | planned / measured |"
echo "|---|---|---|---|---|---|"
"$python" "$here/../tests/onnx/plan_check.py" "$tandem" -- "${train[@]}" -- --devices 1 \
  -- --devices 2 --spatial 2 -- --devices 4 --spatial 4 -- --devices 2 --stages 2 \
  -- --devices 4 --stages 2 --spatial 2 |
  sed -E 's/^(.*): stage ([0-9]+) planned ([0-9.]+) MiB \(at most ([0-9.]+)\), measured ([0-9.]+) MiB, planned \/ measured ([0-9.]+)(.*)$/| `\1` | \2 | \3 | \4 | \5 | \6\7 |/'
