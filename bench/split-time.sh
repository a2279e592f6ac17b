#!/usr/bin/env bash
# The default split (--partition time: each stage the same measured time) against even
# parameter counts, in training throughput: the demo's MLP on 4 CPU devices and unet3d 48³ on 2
# and 4, runs alternating. Prints Markdown: each split and its samples/s median, and the median
# of the per-pair ratios (min-max).
# Usage: bench/split-time.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
tandem=$(mktemp /tmp/tandem-split-XXXXXX)
trap 'rm -f "$tandem"' EXIT
cp "$build/tandem" "$tandem" && chmod +x "$tandem"  # a rebuild during the runs does not change the program measured
mlp=(--model mlp --data mnist --devices 4 --schedule 1f1b --microbatches 8 --batch 64 --steps 300
  --optimizer adam --lr 1e-3 --seed 0)
unet=(--model unet3d --levels 3 --filters 8 --data spheres --volume 48 --batch 4 --microbatches 4
  --train-samples 8 --test-samples 0 --steps 4 --seed 0)
speed() { "$tandem" train "$@" --progress none | grep -o 'samples_per_s=[0-9.]*' | cut -d= -f2; }
split() {
  "$tandem" train "$@" --plan-only --progress none | grep -E '^[0-9]+ +cpu' |
    awk '!seen[$1]++ {print $3 " " $4}' | paste -sd'|' | sed 's/|/ \\| /g'
}
echo "| setting | split by time | samples/s | even parameter counts | samples/s | time / parameters |"
echo "|---|---|---|---|---|---|"
for setting in mlp unet-2 unet-4; do
  case $setting in
    mlp) args=("${mlp[@]}") ;;
    unet-2) args=("${unet[@]}" --devices 2) ;;
    unet-4) args=("${unet[@]}" --devices 4) ;;
  esac
  timed=() even=()
  for _ in $(seq "$repeats"); do
    timed+=("$(speed "${args[@]}")")
    even+=("$(speed "${args[@]}" --partition parameters)")
  done
  python3 - "$setting" "${timed[*]}" "${even[*]}" "$(split "${args[@]}")" \
    "$(split "${args[@]}" --partition parameters)" <<'PY'
import statistics, sys
setting, timed, even, split, even_split = sys.argv[1:]
timed = [float(v) for v in timed.split()]
even = [float(v) for v in even.split()]
ratios = [a / b for a, b in zip(timed, even)]
print(f"| {setting} | {split} | {statistics.median(timed):.1f} | {even_split} | "
      f"{statistics.median(even):.1f} | {statistics.median(ratios):.2f} "
      f"({min(ratios):.2f}-{max(ratios):.2f}) |")
PY
done
