#!/usr/bin/env bash
# What bitwise reproducibility costs: the mlp under 1F1B on 2 and 4 devices, each device keeping
# its own threads (--idle-cores keep, the default) against devices lending their cores while
# they wait (--idle-cores lend, opt-in), separate processes taken in turn. Prints Markdown:
# samples/s medians and min-max, the ratio lend / keep, and how many different losses the
# repeated runs of one command printed (keep: always 1; lend: the BLAS thread count of each
# product, and on some kernels its last bits, follow the timing).
# Usage: bench/idle-cores.sh BUILD_DIR [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
args=(train --model mlp --width 1024 --blocks 8 --data mnist --microbatches M --batch 256 --steps 8
  --optimizer adam --progress none --seed 0)
echo "Each run: \`OMP_WAIT_POLICY=passive $build/tandem ${args[*]} --devices D --idle-cores keep|lend\`"
echo "(\`M\` micro-batches), $repeats runs of each, keep and lend in turn; OpenBLAS kernels:"
echo "\`OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}\`."
echo
echo "| devices | micro-batches | keep: samples/s median | min-max | lend: samples/s median | min-max | lend / keep | different losses, keep | lend |"
echo "|---|---|---|---|---|---|---|---|---|"
for dev in 2 4; do
  for mb in 1 4 8 16; do
    keep=""; lend=""; keep_loss=""; lend_loss=""
    for ((r = 0; r < repeats; r++)); do
      for ic in keep lend; do
        line=$(OMP_WAIT_POLICY=passive "$build/tandem" "${args[@]/#M/$mb}" --devices $dev --idle-cores $ic | grep '^result:')
        sps=$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
        loss=$(sed -n 's/.* loss=\([0-9.]*\).*/\1/p' <<<"$line")
        if [ $ic = keep ]; then keep="$keep $sps"; keep_loss="$keep_loss $loss"
        else lend="$lend $sps"; lend_loss="$lend_loss $loss"; fi
      done
    done
    distinct() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -u | wc -l; }
    echo "$keep|$lend|$(distinct "$keep_loss")|$(distinct "$lend_loss")" | awk -F'|' -v dev=$dev -v mb=$mb '
      function stats(s, out,   n, a, i, j, t) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        out["med"] = a[int((n + 1) / 2)]; out["min"] = a[1]; out["max"] = a[n]
      }
      { stats($1, k); stats($2, l)
        printf "| %d | %d | %.0f | %.0f-%.0f | %.0f | %.0f-%.0f | %.2f | %d | %d |\n", dev, mb, k["med"], k["min"], k["max"], l["med"], l["min"], l["max"], l["med"] / k["med"], $3, $4 }'
  done
done
