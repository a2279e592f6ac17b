#!/usr/bin/env bash
# MPI benchmarks: tandem's point-to-point transfer against a raw MPI ping-pong (bench_mpi), and
# the same 2-stage training in one process against 2 ranks. Prints Markdown.
# Usage: bench/mpi.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

echo "### Point-to-point transfer: tandem against raw MPI"
echo
echo "Command: \`${mpirun[*]} -n 2 $build/bench/bench_mpi --repeats $repeats --iters 20\`"
echo "(ping-pong between two ranks on this machine; GB/s counts both directions)."
echo
"${mpirun[@]}" -n 2 "$build/bench/bench_mpi" --repeats "$repeats" --iters 20
echo

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }

model=(train --model mlp --width 1024 --blocks 8 --data mnist --schedule 1f1b --microbatches 4
  --batch 256 --steps 20 --optimizer adam --progress none --seed 0)
echo "### Two stages in one process against two ranks"
echo
echo "Commands: \`$build/tandem ${model[*]} --devices 2 --threads-per-device 1\` and"
echo "\`${mpirun[*]} -n 2 $build/tandem ${model[*]} --threads-per-device 1\`; $repeats runs each,"
echo "alternating; samples/s from the result line."
echo
inproc=()
ranks=()
for ((r = 0; r < repeats; r++)); do
  inproc+=("$("$build/tandem" "${model[@]}" --devices 2 --threads-per-device 1 |
    sed -n 's/^result:.*samples_per_s=\([0-9.]*\).*/\1/p')")
  ranks+=("$("${mpirun[@]}" -n 2 "$build/tandem" "${model[@]}" --threads-per-device 1 2>/dev/null |
    sed -n 's/^.*result:.*samples_per_s=\([0-9.]*\).*/\1/p')")
done
a=$(printf '%s\n' "${inproc[@]}" | median)
b=$(printf '%s\n' "${ranks[@]}" | median)
echo "| run | samples/s median | min-max | ratio to in-process |"
echo "|---|---|---|---|"
echo "| 2 stages, one process | $a | $(printf '%s\n' "${inproc[@]}" | minmax) | 1.00 |"
echo "| 2 stages, 2 ranks (MPI) | $b | $(printf '%s\n' "${ranks[@]}" | minmax) | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }') |"
