#!/usr/bin/env bash
# The largest unet3d volume under a per-device memory budget when every sample is cut into
# depth slabs (--spatial N), against one device, with one micro-batch and with four under
# 1F1B, and the memory plan's prediction for a slab against its measured peak. Volumes grow on
# a grid of 8 from START until a try ends with status 3 (out of the budget). Prints Markdown
# tables with the command of every row.
# Usage: bench/memory-spatial.sh BUILD_DIR [BUDGET [START]]
set -euo pipefail
build=${1:-build}
budget=${2:-192MiB}
start=${3:-48}
tandem="$build/tandem"
model=(--model unet3d --levels 3 --filters 8 --dropout 0 --data spheres)

source "$(dirname "$0")/memory-try.sh"

echo "Budget \`--device-memory $budget\` per device; each try: \`$tandem train ${model[*]}"
echo "--devices D --stages T --spatial N --schedule 1f1b --microbatches M --batch 2M --steps 1"
echo "--train-samples 2M --test-samples 0 --device-memory $budget --progress none --seed 0 --volume S\`;"
echo "the first S that exceeds the budget (status 3) stops the search. Voxels: the largest volume's"
echo "voxels over one device's with the same micro-batches."
echo
echo "| devices | stages | --spatial | micro-batches | largest volume | voxels vs 1 device | peak MiB per device at that volume |"
echo "|---|---|---|---|---|---|---|"
declare -A one
for micro in 1 4; do
  for layout in "1 1 1" "2 1 2" "4 1 4" "4 2 2"; do
    read -r devices stages spatial <<<"$layout"
    batch=$((2 * micro))
    args=(train "${model[@]}" --devices "$devices" --stages "$stages" --spatial "$spatial"
      --schedule 1f1b --microbatches "$micro" --batch "$batch" --steps 1 --train-samples "$batch"
      --test-samples 0 --device-memory "$budget" --progress none --seed 0)
    best=none peaks=""
    for ((v = start; v <= 256; v += 8)); do
      r=$(try "${args[@]:1}" --volume "$v")
      [ "$r" = oom ] && break
      best=$v
      peaks=${r#ok }
    done
    [ "$devices" = 1 ] && one[$micro]=$best
    ratio=$(awk -v a="$best" -v b="${one[$micro]}" 'BEGIN { printf "%.2f", (a / b) ^ 3 }')
    shown=""
    for p in $peaks; do shown="$shown ${p%%=*}=$(mib "${p#*=}")"; done
    echo "| $devices | $stages | $spatial | $micro | ${best}³ | ${ratio}x |${shown:- -} |"
  done
done
echo
echo "The plan (\`--plan-only\` prints it; \`--partition memory\` plans every slab the same way)"
echo "against the measured peaks of the same step at 64³, 1F1B, one micro-batch of 2 samples:"
echo "per stage, the plan's planned peak for a slab and the largest measured peak of the"
echo "stage's group, in MiB."
echo
echo "| devices | stages | --spatial | per stage: measured / planned (measured / planned) |"
echo "|---|---|---|---|"
for layout in "2 1 2" "4 1 4" "4 2 2"; do
  read -r devices stages spatial <<<"$layout"
  out=$("$tandem" train "${model[@]}" --volume 64 --devices "$devices" --stages "$stages" \
    --spatial "$spatial" --schedule 1f1b --microbatches 1 --batch 2 --steps 1 --train-samples 2 \
    --test-samples 0 --partition memory --progress none --seed 0)
  echo "$out" | awk -v devices="$devices" -v stages="$stages" -v spatial="$spatial" '
    function bytes(v, unit) {
      return v * (unit == "GiB" ? 2^30 : unit == "MiB" ? 2^20 : unit == "KiB" ? 2^10 : 1)
    }
    /^memory plan/ { plan = 1; next }
    plan && /^stage/ { next }
    plan && /^[0-9]+ / { planned[$1] = bytes($(NF - 5), $(NF - 4)); n = $1 + 1; next }
    plan { plan = 0 }
    /^result:/ {
      for (i = 1; i <= NF; i++) if ($i ~ /^peak_mem_cpu:/) {
        split($i, kv, "="); split(kv[1], dev, ":"); s = int(dev[2] / spatial)
        if (kv[2] > measured[s]) measured[s] = kv[2]
      }
    }
    END {
      row = sprintf("| %d | %d | %d |", devices, stages, spatial)
      for (s = 0; s < n; s++)
        row = row sprintf(" %.1f / %.1f (%.2f)%s", measured[s] / 2^20, planned[s] / 2^20,
                          measured[s] / planned[s], s < n - 1 ? "," : "")
      print row " |"
    }'
done
