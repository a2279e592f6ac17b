#!/usr/bin/env bash
# What the same bits on every machine cost: the defaults (--cpu-kernels portable, one thread per
# device) against the fastest choice of this machine. Prints Markdown:
# - kernels: --cpu-kernels portable (OpenBLAS's Haswell, ATen's AVX2) against native, with
#   OpenBLAS's choice of this machine and with the kernels of AVX-512 machines asked for
#   (OPENBLAS_CORETYPE=SkylakeX, Cooperlake), training samples/s from the result line;
# - threads: --threads-per-device 1 (the default) against auto (the cores divided among the
#   devices) on 1 and 2 devices;
# - convolutions: a U-Net with oneDNN capped at AVX2 (portable) against oneDNN's own choice.
# Runs of the two are taken in turn. Usage: bench/portable.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
mlp=(train --model mlp --width 1024 --blocks 4 --data mnist --microbatches 4 --batch 512
  --steps 20 --optimizer adam --progress none --seed 0)
args=("${mlp[@]}")

# samples/s of a result line; median and min-max of a list; a / b.
samples() { sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p'; }
stats() {
  awk '{ for (i = 1; i <= NF; i++) a[i] = $i; n = NF
         for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
         printf "%.4g %.4g-%.4g", a[int((n + 1) / 2)], a[1], a[n] }' <<<"$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "Each run: \`$build/tandem ${args[*]} ...\`; $repeats runs of each side, taken in turn."
core=$(OPENBLAS_VERBOSE=2 "$build/tandem" schedule --help 2>&1 | sed -n 's/^Core: //p' | head -1)
echo "OpenBLAS picks ${core:-unknown} kernels on this machine."
echo
echo "| OpenBLAS kernels asked for | portable: samples/s median | min-max | native: samples/s median | min-max | portable / native |"
echo "|---|---|---|---|---|---|"
# in_turn "A extra args" "B extra args" [ENV...]: $repeats runs of each, A and B in turn;
# prints "medA min-maxA medB min-maxB A/B" (samples/s), the A and B columns of a row.
in_turn() {
  local a=$1 b=$2 sa="" sb="" ma ra mb rb
  shift 2
  for ((r = 0; r < repeats; r++)); do
    # shellcheck disable=SC2086  # the extra arguments are words
    sa="$sa $(env "$@" "$build/tandem" "${args[@]}" $a | samples)"
    # shellcheck disable=SC2086
    sb="$sb $(env "$@" "$build/tandem" "${args[@]}" $b | samples)"
  done
  read -r ma ra <<<"$(stats "$sa")"
  read -r mb rb <<<"$(stats "$sb")"
  echo "$ma | $ra | $mb | $rb | $(ratio "$ma" "$mb")"
}
for core in "" SkylakeX Cooperlake; do  # "": this machine's choice
  row=$(in_turn "--devices 1 --cpu-kernels portable" "--devices 1 --cpu-kernels native" \
    ${core:+OPENBLAS_CORETYPE=$core})
  echo "| ${core:-none (this machine picks)} | $row |"
done
echo
# Convolutions: oneDNN capped at AVX2 (portable) against its choice for this processor, with the
# other kernels the same on both sides.
conv=(train --model unet3d --data spheres --volume 32 --levels 3 --batch 4 --microbatches 2
  --devices 1 --steps 3 --test-samples 4 --progress none --seed 0)
echo "U-Net: \`$build/tandem ${conv[*]} ...\`, OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 on both sides."
echo
echo "| oneDNN kernels | portable (AVX2): samples/s median | min-max | native: samples/s median | min-max | portable / native |"
echo "|---|---|---|---|---|---|"
args=("${conv[@]}")
row=$(in_turn "--cpu-kernels portable" "--cpu-kernels native" OPENBLAS_CORETYPE=Haswell \
  ATEN_CPU_CAPABILITY=avx2)
echo "| AVX2 against this machine's choice | $row |"
args=("${mlp[@]}")
echo
echo "| devices | threads per device with auto | 1 thread: samples/s median | min-max | auto: samples/s median | min-max | 1 / auto |"
echo "|---|---|---|---|---|---|---|"
cores=$(nproc)
for dev in 1 2; do
  row=$(in_turn "--devices $dev" "--devices $dev --threads-per-device auto")
  echo "| $dev | $(( cores / dev > 0 ? cores / dev : 1 )) | $row |"
done
