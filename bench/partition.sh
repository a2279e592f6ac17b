#!/usr/bin/env bash
# Partitions under a memory budget: training throughput of conv3d-stack on 4 CPU devices with
# the parameter split, the memory split and the fit split, each under the same --device-memory,
# runs alternating. Prints Markdown: samples/s median and min-max, the ratio to the memory
# split, the split and the largest peak.
# Usage: bench/partition.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
args=(train --model conv3d-stack --convs 8 --filters 32 --data regression --volume 24 --batch 8
  --microbatches 8 --devices 4 --schedule 1f1b --steps 6 --test-samples 8 --progress none
  --seed 0 --device-memory 27MiB)
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }

echo "Command: \`OMP_WAIT_POLICY=passive $build/tandem ${args[*]} --partition P\`; $repeats runs"
echo "each, alternating; samples/s from the result line."
echo
declare -A runs split peak
partitions=(parameters memory fit)
for ((r = 0; r < repeats; r++)); do
  for p in "${partitions[@]}"; do
    out=$(OMP_WAIT_POLICY=passive "$build/tandem" "${args[@]}" --partition "$p" 2>&1 || true)
    line=$(grep -m 1 '^result:' <<<"$out" || true)
    if [ -z "$line" ]; then
      runs[$p]="out of memory"
      split[$p]=$(awk '$2 ~ /^cpu:/ { printf "%s%s", sep, $3; sep = " \\| " }' <<<"$out")
      continue
    fi
    runs[$p]+="$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line") "
    split[$p]=$(awk '$2 ~ /^cpu:/ { printf "%s%s", sep, $3; sep = " \\| " }' <<<"$out")
    peak[$p]=$(grep -o 'peak_mem_cpu:[0-9]*=[0-9]*' <<<"$line" | cut -d= -f2 | sort -g | tail -1)
  done
done
base=$(tr ' ' '\n' <<<"${runs[memory]}" | grep . | median)
echo "| partition | samples/s median | min-max | ratio to memory | stages | largest peak |"
echo "|---|---|---|---|---|---|"
for p in "${partitions[@]}"; do
  if [ "${runs[$p]}" = "out of memory" ]; then
    echo "| $p | out of memory | - | - | ${split[$p]} | over 27 MiB |"
    continue
  fi
  values=$(tr ' ' '\n' <<<"${runs[$p]}" | grep .)
  m=$(median <<<"$values")
  echo "| $p | $m | $(minmax <<<"$values") | $(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2f", a / b }') | ${split[$p]} | $(awk -v b="${peak[$p]}" 'BEGIN { printf "%.1f MiB", b / 1048576 }') |"
done
