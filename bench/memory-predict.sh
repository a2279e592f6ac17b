#!/usr/bin/env bash
# The largest whole scan `tandem predict` handles under a memory budget per device, on 1, 2 and
# 4 devices (--spatial N), for the 3-level, 8-filter U-Net of bench/memory-spatial.sh: cubes of
# side S (random voxels; the bytes do not depend on them), S in steps of 8.
# Usage: bench/memory-predict.sh BUILD_DIR [BUDGET] [DEVICES...]
set -euo pipefail
build=${1:-build}
budget=${2:-192MiB}
shift $(( $# > 2 ? 2 : $# ))
device_counts=("$@")
[ ${#device_counts[@]} -gt 0 ] || device_counts=(1 2 4)
tandem="$build/tandem"
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=(--model unet3d --levels 3 --filters 8)
# Weights: one training step (predicting needs a checkpoint; the bytes do not depend on them).
"$tandem" train "${model[@]}" --data spheres --volume 16 --batch 2 --microbatches 1 --steps 1 \
  --train-samples 2 --test-samples 0 --devices 1 --progress none --save-dir "$work/ckpt" \
  > /dev/null

source "$(dirname "$0")/memory-try.sh"
# try_side DEVICES SIDE: a scan of SIDE^3 predicted on DEVICES slabs, as run_try.
try_side() {
  local devices=$1 side=$2
  "$python" -c "import numpy as np; np.save('$work/scan.npy', np.random.default_rng(0).standard_normal(($side,)*3).astype(np.float32))"
  run_try predict "${model[@]}" --checkpoint "$work/ckpt" --devices "$devices" \
    --spatial "$devices" --device-memory "$budget" --input "$work/scan.npy" \
    --output "$work/out.npy"
}

echo "Budget \`--device-memory $budget\` per device; each try: \`$tandem predict ${model[*]}"
echo "--checkpoint CKPT --devices N --spatial N --device-memory $budget --input S^3.npy\`."
echo
echo "| devices | largest whole scan | voxels | against 1 device | peak per device at it | planned at it | next side (8 more) |"
echo "|---|---|---|---|---|---|---|"
base=0
for devices in "${device_counts[@]}"; do
  side=64 best=0 peaks=""
  while :; do
    r=$(try_side "$devices" "$side")
    [ "$r" = oom ] && break
    best=$side peaks=${r#ok }
    side=$((side + 8))
  done
  voxels=$((best * best * best))
  [ $base -gt 0 ] || base=$voxels
  ratio=$(awk -v a="$voxels" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
  planned=$(for p in $peaks; do [ "${p%%=*}" != planned_peak ] || awk -v b="${p#*=}" 'BEGIN { printf "%.1f", b / 1048576 }'; done)
  mib=$(for p in $peaks; do [ "${p%%=*}" = planned_peak ] || awk -v b="${p#*=}" 'BEGIN { printf "%.1f ", b / 1048576 }'; done)
  echo "| $devices | ${best}³ | $voxels | $ratio | ${mib% } MiB | $planned MiB | ${side}³: over the budget |"
done
