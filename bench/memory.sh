#!/usr/bin/env bash
# The largest volume that trains under a per-device memory budget, for 1, 2 and 4 devices, with
# and without recomputation: one training step per try, volumes on a grid of `step`, growing
# until a try ends with status 3 (out of the budget). Prints a Markdown table with the command
# of every row. Usage: bench/memory.sh BUILD_DIR [BUDGET [MICROBATCHES BATCH]]
set -euo pipefail
build=${1:-build}
budget=${2:-128MiB}
micro=${3:-1}
batch=${4:-2}
tandem="$build/tandem"

source "$(dirname "$0")/memory-try.sh"

# search NAME STEP MAX ARGS...: the largest multiple of STEP up to MAX that trains.
search() {
  local name=$1 step=$2 max=$3
  shift 3
  for devices in 1 2 4; do
    local partitions="parameters memory"
    [ "$devices" = 1 ] && partitions=parameters
    for partition in $partitions; do
      for recompute in none stage; do
        local args=(--devices "$devices" --schedule 1f1b --microbatches "$micro" --batch "$batch" --steps 1
          --train-samples "$batch" --test-samples 0 --device-memory "$budget" --recompute "$recompute"
          --partition "$partition" --progress none --seed 0 "$@")
        local best=none peaks=""
        for ((v = step; v <= max; v += step)); do
          local r
          r=$(try "${args[@]}" --volume "$v")
          [ "$r" = oom ] && break
          best=$v
          peaks=${r#ok }
        done
        local shown=""
        for p in $peaks; do shown="$shown ${p%%=*}=$(mib "${p#*=}")"; done
        echo "| $name | $devices | $partition | $recompute | ${best}³ |${shown:- -} |"
      done
    done
  done
}

echo "Budget \`--device-memory $budget\` per device; each try: \`$tandem train ... --devices D"
echo "--schedule 1f1b --microbatches $micro --batch $batch --steps 1 --train-samples $batch --test-samples 0"
echo "--device-memory $budget --partition P --recompute R --volume S\` with the model options below; a try"
echo "that exceeds the budget ends with status 3 and the first such S stops the search."
echo
echo "| model | devices | partition | recompute | largest volume | peak MiB per device at that volume |"
echo "|---|---|---|---|---|---|"
search "unet3d (\`--model unet3d --levels 3 --filters 8 --dropout 0 --data spheres\`)" 8 256 \
  --model unet3d --levels 3 --filters 8 --dropout 0 --data spheres
search "conv3d-stack (\`--model conv3d-stack --convs 6 --filters 8 --data regression\`)" 8 256 \
  --model conv3d-stack --convs 6 --filters 8 --data regression
