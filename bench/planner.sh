#!/usr/bin/env bash
# The planner against measurement: each configuration of a sweep trained with `train --auto`
# and every searched option given (the planner then plans that one configuration and its
# split), in passes (planner_parse.sh's run_sweep), its predicted step time and peak set against
# the measured ones (median of the steps after the first; the allocator's peak of the fullest
# device), the medians of its runs and every run alone. Then `train --auto` with nothing given,
# against the best measured configuration of its setting's sweep: once, and the two in turn 3
# times each (planner_parse.sh's in_turn). Prints Markdown.
# Usage: bench/planner.sh TANDEM_BINARY [STEPS]
# STEPS: default planner_steps (planner_parse.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/planner_parse.sh"
tandem=${1:-build/tandem}
steps=${2:-$planner_steps}
unet64=(--model unet3d --levels 3 --filters 8 --data spheres --volume 64 --batch 2 --devices 4
  --device-memory 192MiB)
unet48=(--model unet3d --levels 3 --filters 8 --data spheres --volume 48 --batch 4 --devices 2
  --device-memory 192MiB)
mlp=(--model mlp --width 1024 --blocks 8 --data mnist --batch 256 --devices 4 --optimizer adam)

# train SETTING FLAGS...: the setting's run with FLAGS and --auto; its output in `out`.
train() {
  local -n setting_args=$1
  shift
  out=$(OMP_WAIT_POLICY=passive "$tandem" train "${setting_args[@]}" --auto "$@" --steps "$steps" \
    --progress none 2>&1)
}

for s in 1 2 4; do
  for sched in 1f1b zb-h1; do
    for rc in none stage; do
      add_config unet64 --spatial $s --schedule $sched --microbatches 2 --recompute $rc
    done
  done
done
for s in 1 2; do
  for sched in gpipe interleaved; do
    for m in 2 4; do
      extra=()
      [ "$sched" = interleaved ] && extra=(--virtual-stages 2)
      add_config unet48 --spatial $s --schedule $sched --microbatches $m --recompute none "${extra[@]}"
    done
  done
done
for sched in 1f1b gpipe zb-h1 interleaved; do
  for m in 4 8; do
    extra=()
    [ "$sched" = interleaved ] && extra=(--virtual-stages 2)
    add_config mlp --spatial 1 --schedule $sched --microbatches $m --recompute none "${extra[@]}"
  done
done

run_sweep train
sweep_tables
for setting in unet64 unet48 mlp; do
  train "$setting"
  parse_auto "$out"
  sps=$(samples_per_s "$setting" "$meas_ms")
  ratio=$(awk -v a="$sps" -v b="${best_sps[$setting]}" 'BEGIN { printf "%.2f", a / b }')
  row="| $setting | $auto | $sps | ${best_flags[$setting]} | ${best_sps[$setting]} | $ratio"
  tail="$took s | $meas_ms ms |"
  in_turn train "$setting" "$auto" "${best_flags[$setting]}"
  echo "$row | $in_turn_ratio | $tail"
done
