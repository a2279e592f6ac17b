#!/usr/bin/env bash
# The largest unet3d volume under a per-device memory budget when every sample is cut into
# depth slabs (--spatial N), alone and under pipeline stages, against one device, with one
# micro-batch and with four under 1F1B; a slab's bytes per voxel against one device's; and the
# memory plan's prediction for a slab against its measured peak. Volumes grow on a grid of 8
# from START until a try ends with status 3 (out of the budget). STEPS training steps per try
# (1: the first step; 2: with the optimizer's state of the steps after). Prints Markdown tables
# with the command of every row.
# Usage: bench/memory-spatial.sh BUILD_DIR [BUDGET [START [STEPS]]]
set -euo pipefail
build=${1:-build}
budget=${2:-192MiB}
start=${3:-48}
steps=${4:-1}
tandem="$build/tandem"
model=(--model unet3d --levels 3 --filters 8 --dropout 0 --data spheres)

source "$(dirname "$0")/memory-try.sh"

# planes_of EXTENT N: the planes of the first (largest) of N slabs, in multiples of 4 (3 levels).
planes_of() {
  awk -v e="$1" -v n="$2" 'BEGIN { u = e / 4; printf "%d", (int(u / n) + (u % n ? 1 : 0)) * 4 }'
}

echo "Budget \`--device-memory $budget\` per device; each try: \`$tandem train ${model[*]}"
echo "--devices D --stages T --spatial N --schedule 1f1b --microbatches M --batch 2M --steps $steps"
echo "--train-samples 2M --test-samples 0 --device-memory $budget --progress none --seed 0 --volume S\`;"
echo "the first S that exceeds the budget (status 3) stops the search. Voxels: the largest volume's"
echo "voxels over one device's with the same micro-batches. Bytes per voxel: device 0's peak over"
echo "the voxels of its slab of each sample (the first, largest slab: planes x S x S), against one"
echo "device's peak over S^3."
echo
echo "| devices | stages | --spatial | micro-batches | largest volume | voxels vs 1 device | device 0: peak MiB, slab voxels, bytes per voxel (vs 1 device) | peak MiB per device |"
echo "|---|---|---|---|---|---|---|---|"
declare -A one_volume one_per_voxel
for micro in 1 4; do
  for layout in "1 1 1" "2 1 2" "4 1 4" "8 1 8" "4 2 2" "8 2 4"; do
    read -r devices stages spatial <<<"$layout"
    batch=$((2 * micro))
    args=(train "${model[@]}" --devices "$devices" --stages "$stages" --spatial "$spatial"
      --schedule 1f1b --microbatches "$micro" --batch "$batch" --steps "$steps"
      --train-samples "$((batch * steps))" --test-samples 0 --device-memory "$budget"
      --progress none --seed 0)
    best=none peaks=""
    for ((v = start; v <= 256; v += 8)); do
      r=$(try "${args[@]:1}" --volume "$v")
      [ "$r" = oom ] && break
      best=$v
      peaks=${r#ok }
    done
    shown="" first=""
    for p in $peaks; do
      shown="$shown ${p%%=*}=$(mib "${p#*=}")"
      [ -z "$first" ] && first=${p#*=}
    done
    voxels=$(( $(planes_of "$best" "$spatial") * best * best ))
    per_voxel=$(awk -v b="$first" -v v="$voxels" 'BEGIN { printf "%.0f", b / v }')
    if [ "$devices" = 1 ]; then
      one_volume[$micro]=$best
      one_per_voxel[$micro]=$per_voxel
    fi
    ratio=$(awk -v a="$best" -v b="${one_volume[$micro]}" 'BEGIN { printf "%.2f", (a / b) ^ 3 }')
    against=$(awk -v a="$per_voxel" -v b="${one_per_voxel[$micro]}" 'BEGIN { printf "%.2f", a / b }')
    echo "| $devices | $stages | $spatial | $micro | ${best}³ | ${ratio}x | $(mib "$first"), $voxels, $per_voxel (${against}x) |${shown:- -} |"
  done
done
echo
echo "The same 64³ volume without a budget, one micro-batch of 2 samples, split into more slabs:"
echo "device 0's peak against one device's divided by the slabs."
echo
echo "| --spatial | peak of device 0 MiB | 1 device's peak / N MiB | ratio |"
echo "|---|---|---|---|"
whole=""
for spatial in 1 2 4 8; do
  r=$(try "${model[@]}" --volume 64 --devices "$spatial" --spatial "$spatial" --schedule 1f1b \
    --microbatches 1 --batch 2 --steps "$steps" --train-samples "$((2 * steps))" --test-samples 0 \
    --progress none --seed 0)
  peak=$(echo "${r#ok }" | tr ' ' '\n' | head -1 | cut -d= -f2)
  [ -z "$whole" ] && whole=$peak
  echo "| $spatial | $(awk -v b="$peak" 'BEGIN { printf "%.1f", b / 2^20 }') | $(awk -v b="$whole" -v n="$spatial" 'BEGIN { printf "%.1f", b / n / 2^20 }') | $(awk -v a="$peak" -v b="$whole" -v n="$spatial" 'BEGIN { printf "%.2f", a * n / b }') |"
done
echo
echo "The plan (\`--plan-only\` prints it; \`--partition memory\` plans every slab the same way)"
echo "against the measured peaks of the same step at 64³, 1F1B, one micro-batch of 2 samples:"
echo "per stage, the plan's planned peak for a slab and the largest measured peak of the"
echo "stage's group, in MiB."
echo
echo "| devices | stages | --spatial | per stage: measured / planned (measured / planned) |"
echo "|---|---|---|---|"
for layout in "2 1 2" "4 1 4" "8 1 8" "4 2 2"; do
  read -r devices stages spatial <<<"$layout"
  out=$("$tandem" train "${model[@]}" --volume 64 --devices "$devices" --stages "$stages" \
    --spatial "$spatial" --schedule 1f1b --microbatches 1 --batch 2 --steps "$steps" \
    --train-samples "$((2 * steps))" --test-samples 0 --partition memory --progress none --seed 0)
  echo "$out" | awk -v devices="$devices" -v stages="$stages" -v spatial="$spatial" '
    /^planned: peak_bytes=/ {
      split($2, kv, "="); n = split(kv[2], p, ",")
      for (s = 1; s <= n; s++) planned[s - 1] = p[s]
    }
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
