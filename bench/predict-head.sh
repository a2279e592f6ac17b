#!/usr/bin/env bash
# `make demo-unet`'s model applied to the whole T1 head of Debian's mricron-data (ch2.nii.gz,
# 181 x 217 x 181) in one piece: on 1 device and on 4 (--spatial 4), the forward's seconds and
# peaks; under a budget between the two, 1 device refused before work and 4 devices predicting;
# the Dice of the mask against ch2bet's brain (> 0) over the whole head and over the columns
# training held out (the last 72 of x, as --data mri holds them out); and a picture of the mask
# over the scan (bench/predict_picture.py).
# Usage: bench/predict-head.sh BUILD_DIR CHECKPOINT OUT_DIR
# CHECKPOINT: the save folder of `make demo-unet` run with --save-dir (2 levels, 8 filters).
set -euo pipefail
build=${1:-build}
ckpt=${2:?give the save folder of a make demo-unet run}
out=${3:?a folder for the results}
tandem="$build/tandem"
python=/usr/bin/python3
head_scan=/usr/share/mricron/templates/ch2.nii.gz
brain=/usr/share/mricron/templates/ch2bet.nii.gz
mkdir -p "$out"
model=(--model unet3d --levels 2 --filters 8 --checkpoint "$ckpt" --standardize head
  --input "$head_scan" --progress none)

line() { grep '^result:' | sed 's/^result: //'; }
echo "Command: \`$tandem predict ${model[*]} --devices N --spatial N --output MASK --output-kind mask\`"
echo
echo "| devices | forward seconds | peak per device | planned (device that holds the most) |"
echo "|---|---|---|---|"
for n in 1 4; do
  r=$("$tandem" predict "${model[@]}" --devices $n --spatial $n --device-memory 64GiB \
    --output "$out/mask_$n.nii.gz" --output-kind mask | line)
  seconds=$(echo "$r" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
  planned=$(echo "$r" | sed -n 's/.*planned_peak=\([0-9]*\).*/\1/p')
  peaks=$(echo "$r" | grep -o 'peak_mem_[^ ]*' | sed 's/.*=//' |
    awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 / 1e6 }')
  echo "| $n | $seconds | $peaks MB | $(awk -v b="$planned" 'BEGIN { printf "%.0f MB", b / 1e6 }') |"
done
echo
# A budget between 4 devices' peak and 1 device's: the largest peak of 4 devices, and a half.
budget=$("$tandem" predict "${model[@]}" --devices 4 --spatial 4 --device-memory 64GiB \
  --output "$out/p.nii.gz" | line | sed -n 's/.*planned_peak=\([0-9]*\).*/\1/p' |
  awk '{ printf "%.0f", $1 * 1.5 }')
set +e
refusal=$("$tandem" predict "${model[@]}" --devices 1 --device-memory "$budget" \
  --output "$out/refused.nii.gz" 2>&1)
status=$?
set -e
echo "Under \`--device-memory $budget\` (1.5x the plan of 4 devices): 1 device ends with status"
echo "$status before any work:"
echo
echo '```'
echo "$refusal" | grep -v '^placement\|^stage\|^[0-9]' | fold -s -w 96
echo '```'
echo
"$tandem" predict "${model[@]}" --devices 4 --spatial 4 --device-memory "$budget" \
  --output "$out/budget.nii.gz" --output-kind mask | line | sed 's/^/4 devices: /'
echo
"$python" - "$out/mask_4.nii.gz" "$out/mask_1.nii.gz" "$brain" <<'PY'
import sys
import nibabel as nib
import numpy as np
four, one, brain = (np.asarray(nib.load(p).dataobj) > 0 for p in sys.argv[1:4])
def dice(a, b):
    return 2 * np.logical_and(a, b).sum() / (a.sum() + b.sum())
# --data mri holds out the last 40% of X (72 of 181 columns): the first axis of the array nibabel reads.
held = slice(brain.shape[0] - round(0.4 * brain.shape[0]), brain.shape[0])
print(f"Dice of the 4-device mask against ch2bet > 0: {dice(four, brain):.4f} over the head, "
      f"{dice(four[held], brain[held]):.4f} over the held-out columns; the 1-device "
      f"and 4-device masks differ in {int((four != one).sum())} voxels.")
PY
"$python" "$(dirname "$0")/predict_picture.py" "$head_scan" "$out/mask_4.nii.gz" \
  "$out/ch2_mask.png"
