#!/usr/bin/env bash
# The memory plan's planned peak and its "at most" per stage (--partition memory) against the
# peak the same step measures, for unet3d and conv3d-stack on 2 and 4 devices, one micro-batch and four under
# 1F1B, with and without recomputation. Prints a Markdown table with the command of every row.
# Usage: bench/memory-plan.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
tandem="$build/tandem"

# compare NAME VOLUME ARGS...: one row per (devices, micro-batches, recompute) with every stage.
compare() {
  local name=$1 volume=$2
  shift 2
  local devices micro batch recompute out
  for devices in 2 4; do
    for micro in 1 4; do
      batch=$((2 * micro))
      for recompute in none stage; do
        out=$("$tandem" train "$@" --volume "$volume" --devices "$devices" --schedule 1f1b \
          --microbatches "$micro" --batch "$batch" --steps 1 --train-samples "$batch" \
          --test-samples 0 --partition memory --recompute "$recompute" --progress none --seed 0)
        # The plan's last column is "N UNIT"; the result line has peak_mem_cpu:S=BYTES.
        echo "$out" | awk -v name="$name" -v volume="$volume" -v devices="$devices" \
          -v micro="$micro" -v recompute="$recompute" '
          function bytes(v, unit) {
            return v * (unit == "GiB" ? 2^30 : unit == "MiB" ? 2^20 : unit == "KiB" ? 2^10 : 1)
          }
          /^memory plan/ { plan = 1; next }
          plan && /^stage/ { next }
          # The last columns: planned peak, late receivers, at most, each "N UNIT".
          plan && /^[0-9]+ / {
            planned[$1] = bytes($(NF - 5), $(NF - 4)); most[$1] = bytes($(NF - 1), $NF)
            stages = $1 + 1; next
          }
          plan { plan = 0 }
          /^result:/ {
            for (i = 1; i <= NF; i++) if ($i ~ /^peak_mem_cpu:/) {
              split($i, kv, "="); split(kv[1], dev, ":"); measured[dev[2]] = kv[2]
            }
          }
          END {
            row = sprintf("| %s %d³ | %d | %d | %s |", name, volume, devices, micro, recompute)
            for (s = 0; s < stages; s++) {
              row = row sprintf(" %.1f / %.1f / %.1f (%.2f)", measured[s] / 2^20,
                                planned[s] / 2^20, most[s] / 2^20, measured[s] / planned[s])
              if (s < stages - 1) row = row ","
            }
            print row " |"
          }'
      done
    done
  done
}

echo "Each row: \`$tandem train MODEL --volume S --devices D --schedule 1f1b --microbatches M"
echo "--batch 2M --steps 1 --train-samples 2M --test-samples 0 --partition memory --recompute R"
echo "--progress none --seed 0\`; per stage in MiB: the measured peak, the plan's planned peak"
echo "and its bound for a receiver running late (\"at most\"), and measured / planned."
echo
echo "| model | devices | micro-batches | recompute | per stage: measured / planned / at most MiB (measured / planned) |"
echo "|---|---|---|---|---|"
compare unet3d 56 --model unet3d --levels 3 --filters 8 --dropout 0 --data spheres
compare conv3d-stack 64 --model conv3d-stack --convs 6 --filters 8 --data regression
