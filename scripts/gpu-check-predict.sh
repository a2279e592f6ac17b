# shellcheck shell=bash disable=SC2154  # sourced by scripts/gpu-check.sh, which sets these
# Step 10 of scripts/gpu-check.sh (sourced by it, with its helpers: section, run_step, record,
# status_of, wanted): the largest whole scan `tandem predict` takes in one piece under
# --device-memory 16GiB per device, for the 3D U-Net on cuda:0, with --spatial 1, 2 and 4 (the
# groups' devices sharing the one GPU), and each one's peak bytes per voxel of the scan against
# one device's. Scans are cubes of random voxels (the bytes do not depend on them) of side 256, 320,
# ... 640; a scan whose forward plans more than the budget is refused with status 3 before any
# work, which stops that layout's search.

section "10. the largest whole scan tandem predict takes under 16 GiB per device: --spatial 1, 2, 4"
predict_scans=/tmp/tandem-gpu-check-scans
predict_model=(--model unet3d --levels 3 --filters 8)
predict_one_per_voxel=""

# predict_search NAME DEVICES SPATIAL
predict_search() {
  local name=$1 devices=$2 spatial=$3 best=none stop="" side line peak per_voxel=""
  for side in 256 320 384 448 512 576 640; do
    if [ ! -f "$predict_scans/$side.npy" ] &&
      ! python3 -c "import numpy as np; np.save('$predict_scans/$side.npy', np.random.default_rng(0).standard_normal(($side,)*3).astype(np.float32))" \
        >"$out/predict-scan-$side.log" 2>&1; then
      stop="<br>$side^3: no scan written (python3 with NumPy): $(tail -n 1 "$out/predict-scan-$side.log")"
      break
    fi
    run_step 60 "predict-${name// /_}-$side.log" "$bin_tandem" predict "${predict_model[@]}" \
      --checkpoint "$predict_scans/ckpt" --devices "$devices" --spatial "$spatial" \
      --device-memory 16GiB --input "$predict_scans/$side.npy" --output "$predict_scans/out.npy" \
      --progress none
    if [ "$step_rc" != 0 ]; then
      stop="<br>$side^3: $(status_of "$step_rc" "$step_limit"): $(tail -n +2 "$out/predict-${name// /_}-$side.log" 2>/dev/null |
        grep -m 1 -i 'plans\|memory\|error\|tandem:' | cut -c 1-300)"
      break
    fi
    best=$side
  done
  line=$(grep -h -m 1 'result:' "$out/predict-${name// /_}-$best.log" 2>/dev/null || true)
  # The bytes of all the slabs: the sum of the listed peaks (devices that share a GPU share its
  # caching allocator's one number, listed once: docs/memory.md), over the scan's voxels.
  peak=$(grep -o 'peak_mem_[^ ]*=[0-9]*' <<<"$line" | cut -d= -f2 | awk '{ s += $1 } END { if (NR) print s }')
  if [[ $best =~ ^[0-9]+$ && -n $peak ]]; then
    local v
    v=$(awk -v p="$peak" -v s="$best" 'BEGIN { printf "%.0f", p / (s * s * s) }')
    per_voxel="<br>peak bytes per voxel: $v"
    if [ "$spatial" = 1 ]; then
      predict_one_per_voxel=$v
    elif [ -n "$predict_one_per_voxel" ]; then
      per_voxel+=" ($(awk -v a="$v" -v b="$predict_one_per_voxel" 'BEGIN { printf "%.2f", a / b }')x one device's)"
    fi
  fi
  record "largest whole scan predicted, $name" "$best" 0 "$line$per_voxel$stop"
}

if ! wanted "$current_step"; then
  record "largest whole scan predicted" "$(status_of 98 0)" 0 ""
elif [ -x "$bin_tandem" ] && "$bin_tandem" predict --help >/dev/null 2>&1; then
  mkdir -p "$predict_scans"
  # Weights: one training step on a small volume (the bytes do not depend on them).
  run_step 60 predict-weights.log "$bin_tandem" train "${predict_model[@]}" --data spheres \
    --volume 32 --batch 1 --microbatches 1 --steps 1 --train-samples 1 --test-samples 0 \
    --devices cuda:0 --progress none --save-dir "$predict_scans/ckpt"
  if [ "$step_rc" = 0 ]; then
    predict_search "1 device" cuda:0 1
    predict_search "spatial 2" cuda:0,cuda:0 2
    predict_search "spatial 4" cuda:0,cuda:0,cuda:0,cuda:0 4
  else
    record "largest whole scan predicted" "$(status_of "$step_rc" "$step_limit")" "$step_seconds" \
      "the weights' training step: $(grep -m 1 -i 'error\|tandem:' "$out/predict-weights.log" 2>/dev/null)"
  fi
  rm -rf "$predict_scans"
else
  record "largest whole scan predicted" "skipped" 0 "this build has no tandem predict"
fi
