#!/usr/bin/env bash
# The planner under mpirun against measurement, as bench/planner.sh in process: each
# configuration trained with `train --auto` and every searched option given, in passes
# (planner_parse.sh's run_sweep), its predicted step time and peak against the measured ones;
# then `train --auto` with nothing given against the best measured configuration of its
# setting, once and in turn (planner_parse.sh's in_turn). The ranks share this machine's cores
# (mpirun --oversubscribe --bind-to none). Prints Markdown.
# Usage: bench/planner_mpi.sh TANDEM_BINARY [STEPS]
# STEPS: default planner_steps (planner_parse.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/planner_parse.sh"
tandem=${1:-build/tandem}
steps=${2:-$planner_steps}
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
# Each setting: its rank count, then train's options.
unet48=(2 --model unet3d --levels 3 --filters 8 --data spheres --volume 48 --batch 4
  --device-memory 192MiB)
unet32r2=(4 --model unet3d --levels 3 --filters 8 --data spheres --volume 32 --batch 2
  --replicas 2)
mlpr2=(4 --model mlp --width 1024 --blocks 4 --data mnist --batch 128 --replicas 2
  --optimizer adam)

# train SETTING FLAGS...: the setting's job with FLAGS and --auto; its output in `out`.
train() {
  local -n setting_args=$1
  shift
  out=$(OMP_WAIT_POLICY=passive timeout 600 "${mpirun[@]}" -n "${setting_args[0]}" "$tandem" \
    train "${setting_args[@]:1}" --auto "$@" --steps "$steps" --progress none 2>&1)
}
for s in 1 2; do
  for sched in 1f1b gpipe; do
    add_config unet48 --spatial $s --schedule $sched --microbatches 2 --recompute none
  done
done
for s in 1 2; do
  add_config unet32r2 --spatial $s --schedule 1f1b --microbatches 2 --recompute none
done
for sched in 1f1b zb-h1; do
  for m in 2 4; do
    add_config mlpr2 --spatial 1 --schedule $sched --microbatches $m --recompute none
  done
done

run_sweep train
sweep_tables
for setting in unet48 unet32r2 mlpr2; do
  train "$setting" || { echo "| $setting | failed: $(tail -1 <<<"$out") |"; continue; }
  parse_auto "$out"
  sps=$(samples_per_s "$setting" "$meas_ms")
  ratio=$(awk -v a="$sps" -v b="${best_sps[$setting]}" 'BEGIN { printf "%.2f", a / b }')
  row="| $setting | $auto | $sps | ${best_flags[$setting]} | ${best_sps[$setting]} | $ratio"
  tail="$took s | $meas_ms ms |"
  in_turn train "$setting" "$auto" "${best_flags[$setting]}"
  echo "$row | $in_turn_ratio | $tail"
done
