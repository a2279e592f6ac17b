# Sourced by the memory benches (bench/memory.sh, bench/memory-spatial.sh,
# bench/memory-predict.sh); needs $tandem.
# run_try COMMAND ARGS...: runs `$tandem COMMAND ARGS`; prints "ok PEAKS" (the result line's
# peak_mem_ fields, then planned_peak=B where the line has one: predict under a budget) or "oom" (status 3: out of the budget); stops the calling script on any
# other failure, naming it.
run_try() {
  local command=$1 out status
  shift
  set +e
  out=$("$tandem" "$command" "$@" 2>&1)
  status=$?
  set -e
  if [ $status -eq 0 ]; then
    echo "ok $(echo "$out" | grep '^result:' | grep -o 'peak_mem_[^ ]*' | sed 's/peak_mem_//' | tr '\n' ' ')$(echo "$out" | grep '^result:' | grep -o ' planned_peak=[0-9]*' | head -1)"
  elif [ $status -eq 3 ]; then
    echo oom
  else
    echo "$out" >&2
    echo "$0: tandem $command $* failed with status $status" >&2
    exit 1
  fi
}

# try ARGS...: `tandem train ARGS` (one step), as run_try.
try() { run_try train "$@"; }

# mib BYTES: whole MiB.
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
