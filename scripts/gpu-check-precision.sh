# shellcheck shell=bash disable=SC2154  # sourced by scripts/gpu-check.sh, which sets these
# Step 11 of scripts/gpu-check.sh (sourced by it, with its helpers: section, run_step, record,
# status_of, wanted): --precision on one GPU. For fp32, bf16 and fp16 (dynamic loss scaling) the
# largest unet3d volume (96, 128, ... 256) whose training step fits --device-memory 16GiB on
# cuda:0, each with one step; then the speed of all three at fp32's largest volume, 4 steps
# each (samples/s of the result line, the first step's warm-up included), against fp32's.

section "11. --precision fp32, bf16, fp16: the largest unet3d volume under 16 GiB, and the speed"
precision_model=(train --model unet3d --data spheres --batch 1 --microbatches 1 --train-samples 4
  --test-samples 0 --dropout 0 --devices cuda:0 --schedule sequential --progress none)
precision_fp32_best=none
precision_fp32_speed=""

# precision_search PRECISION: the largest volume of one training step under 16 GiB.
precision_search() {
  local p=$1 best=none v stop="" line
  for v in 96 128 160 192 224 256; do
    run_step 60 "precision-$p-$v.log" "$bin_tandem" "${precision_model[@]}" --steps 1 \
      --device-memory 16GiB --precision "$p" --volume "$v"
    if [ "$step_rc" != 0 ]; then
      stop="<br>$v^3: $(status_of "$step_rc" "$step_limit"): $(tail -n +2 "$out/precision-$p-$v.log" 2>/dev/null |
        grep -m 1 -i 'memory\|error\|tandem:' | cut -c 1-300)"
      break
    fi
    best=$v
  done
  line=$(grep -h -m 1 'result:' "$out/precision-$p-$best.log" 2>/dev/null || true)
  [ "$p" = fp32 ] && precision_fp32_best=$best
  record "largest unet3d volume, --precision $p" "$best" 0 "$line$stop"
}

# precision_speed PRECISION VOLUME: samples/s of 4 steps.
precision_speed() {
  local p=$1 v=$2 line speed ratio=""
  run_step 90 "precision-speed-$p.log" "$bin_tandem" "${precision_model[@]}" --steps 4 \
    --precision "$p" --volume "$v"
  line=$(grep -h -m 1 'result:' "$out/precision-speed-$p.log" 2>/dev/null || true)
  speed=$(grep -o 'samples_per_s=[0-9.]*' <<<"$line" | cut -d= -f2)
  [ "$p" = fp32 ] && precision_fp32_speed=$speed
  if [[ -n $speed && -n $precision_fp32_speed ]]; then
    ratio="<br>$(awk -v a="$speed" -v b="$precision_fp32_speed" 'BEGIN { printf "%.2f", a / b }')x fp32's samples/s"
  fi
  record "unet3d $v^3 speed, --precision $p" "$(status_of "$step_rc" "$step_limit")" \
    "$step_seconds" "$line$ratio"
}

if ! wanted "$current_step"; then
  record "--precision on one GPU" "$(status_of 98 0)" 0 ""
elif [ -x "$bin_tandem" ] && "$bin_tandem" train --help 2>/dev/null | grep -q -- '--loss-scale'; then
  for p in fp32 bf16 fp16; do precision_search "$p"; done
  if [[ $precision_fp32_best =~ ^[0-9]+$ ]]; then
    for p in fp32 bf16 fp16; do precision_speed "$p" "$precision_fp32_best"; done
  fi
else
  record "--precision on one GPU" "skipped" 0 "this build has no --loss-scale (fp16)"
fi
