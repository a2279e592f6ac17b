#!/usr/bin/env bash
# tandem plan --volume max against training: the volume it names trains with the configuration
# it chose (one step, status 0), and the next volume of the grid with the leanest configuration
# there does not (status 3, out of the budget). Prints Markdown.
# Usage: bench/planner-volume.sh TANDEM_BINARY [DEVICES] [BUDGET]
set -euo pipefail
tandem=${1:-build/tandem}
devices=${2:-4}
budget=${3:-192MiB}
model=(--model unet3d --levels 3 --filters 8 --data spheres --batch 2 --train-samples 4
  --test-samples 2)
start=$(date +%s.%N)
out=$(OMP_WAIT_POLICY=passive "$tandem" plan "${model[@]}" --volume max --devices "$devices" \
  --device-memory "$budget" --repeats 1 2>&1)
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
tried=$(sed -n 's/^volumes tried on the grid of [0-9]* (bytes measured): //p' <<<"$out")
largest=$(sed -n 's/^largest volume: \([0-9]*\) .*/\1/p' <<<"$out")
chosen=$(sed -n 's/^chosen: tandem train //p' <<<"$out")
next=$(sed -n 's/.*at volume \([0-9]*\) the leanest configuration .*/\1/p' <<<"$out")
leanest=$(sed -n 's/.*at volume [0-9]* the leanest configuration (\([^)]*\)) plans.*/\1/p' <<<"$out")
limit=$(sed -n 's/^largest volume: [0-9]* ([^)]*); //p' <<<"$out")
echo "Command: \`$tandem plan ${model[*]} --volume max --devices $devices --device-memory $budget --repeats 1\` ($took s)"
echo
echo "- volumes tried: $tried"
echo "- largest volume: $largest; $limit"
# shellcheck disable=SC2086
line=$(OMP_WAIT_POLICY=passive "$tandem" train $chosen --steps 1 --progress none 2>&1 | tail -1) && rc=0 || rc=$?
echo "- \`train\` at $largest³ with the chosen configuration: status $rc; ${line}"
if [ -n "$next" ]; then
  # shellcheck disable=SC2086
  line=$(OMP_WAIT_POLICY=passive "$tandem" train "${model[@]}" --volume "$next" --devices "$devices" \
    --device-memory "$budget" $leanest --steps 1 --progress none 2>&1 | tail -1) && rc=0 || rc=$?
  echo "- \`train\` at $next³ with the leanest configuration there ($leanest): status $rc; ${line}"
fi
