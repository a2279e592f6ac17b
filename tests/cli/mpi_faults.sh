#!/usr/bin/env bash
# Fault paths of `tandem train` under mpirun, checked from outside the job: it must end by
# itself with a non-zero status, quickly, and say where it broke with the rank prefix.
#   rank-exception  4 ranks; only rank 2's stage exceeds its memory budget (status 3)
#   silent-rank     4 ranks; rank 1 is stopped (SIGSTOP) mid-training, so it never sends
#   mismatch        2 ranks started with different --lr
#   mismatch-report 2 ranks of which only one asks for --report
#   mismatch-save   2 ranks of which only one saves checkpoints
# Usage: mpi_faults.sh CASE TANDEM MPIRUN...
set -uo pipefail
case_name=$1
tandem=$2
shift 2
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--model mlp --width 64 --blocks 2 --data mnist --schedule 1f1b --microbatches 4 --batch 64)

fail() {
  echo "----- output -----"
  cat "$work/out"
  echo "------------------"
  echo "FAIL ($case_name): $*"
  exit 1
}
expect() {  # expect TEXT: the output contains TEXT
  grep -qF -- "$1" "$work/out" || fail "the output lacks '$1'"
}

# Each case ends the job within seconds of its fault: a refusal at start, an exception in the
# first step, or a 5 s comm timeout, then MPI_Abort. The 60 s bound on that, counted from the
# moment the fault is in place (the launch, or the SIGSTOP of silent-rank), leaves room for
# starting the ranks on a loaded machine (under 15 s with two busy loops on the two cores here)
# and still fails a job that waits out a longer timeout or never ends by itself.
# TANDEM_TEST_TIME_SCALE (a whole number, 1 by default) multiplies both for builds that run
# several times slower: scripts/check-sanitize sets it, as instrumented ranks start slowly.
scale=${TANDEM_TEST_TIME_SCALE:-1}
[[ $scale =~ ^[1-9][0-9]*$ ]] || { echo "TANDEM_TEST_TIME_SCALE must be a whole number >= 1, not '$scale'"; exit 2; }
bound=$((60 * scale))
limit=$((120 * scale))
start=$(date +%s)
case $case_name in
rank-exception)
  # Stage 2 gets nine layers (526k parameters, ~8 MiB with gradients and Adam); the others
  # stay far below 6 MiB.
  timeout $limit "${mpirun[@]}" -n 4 "$tandem" train --model mlp --width 256 --blocks 4 \
    --data mnist --schedule 1f1b --microbatches 4 --batch 64 --balance 1,1,9,1 --device-memory 6MiB --steps 5 --progress none >"$work/out" 2>&1
  status=$?
  expect "[r2/4] tandem: cpu:2 is out of its 6.0 MiB budget: stage 2"
  [ "$status" -eq 3 ] || fail "an out-of-memory job must end with status 3, not $status"
  ;;
silent-rank)
  # Each rank records its pid (exec keeps it); rank 1 is stopped once training runs.
  timeout $limit "${mpirun[@]}" -n 4 bash -c "echo \$\$ > '$work'/pid.\${OMPI_COMM_WORLD_RANK:-\${PMIX_RANK:-x}}; exec '$tandem' train ${common[*]} --epochs 100 --progress line --comm-timeout 5" \
    >"$work/out" 2>&1 &
  job=$!
  # Stop rank 1 once training is under way: a progress line past step 1 (the loss owner cannot
  # finish a step without rank 1) and rank 1's pid on file. A condition, polled until it holds
  # or the job ends; the timeouts bound the wait.
  until [ -s "$work/pid.1" ] && grep -qE 'step ([2-9]|[1-9][0-9]+)/' "$work/out" 2>/dev/null; do
    kill -0 $job 2>/dev/null || fail "the job ended before training was under way"
    sleep 0.2
  done
  kill -STOP "$(cat "$work/pid.1")"
  start=$(date +%s)  # the fault is in place from here
  wait $job
  status=$?
  kill -KILL "$(cat "$work/pid.1")" 2>/dev/null
  expect "waited 5 s for message"
  grep -qE '^\[r[0-9]/4\] step [0-9]+ failed on device [0-9] \(cpu:[0-9]\), stage [0-9], action' "$work/out" ||
    fail "no rank-prefixed report of the step, device, stage and action that waited"
  # Whichever rank times out first (rank 3 waits for rank 2, which waits for rank 1), it follows
  # the chain of waiting ranks to the one that stopped.
  grep -qE "rank 1 does not answer what it waits for" "$work/out" || fail "no report names rank 1 as the silent peer"
  [ -n "${SHOW_OUTPUT:-}" ] && cat "$work/out"
  grep -qE '^ +\^$' "$work/out" || fail "no schedule grid with the waiting action marked"
  ;;
mismatch)
  timeout $limit "${mpirun[@]}" -n 1 "$tandem" train "${common[@]}" --steps 2 --lr 0.1 : \
    -n 1 "$tandem" train "${common[@]}" --steps 2 --lr 0.2 >"$work/out" 2>&1
  status=$?
  expect "ranks disagree on the configuration: rank 0 has lr=0.1; rank 1 has lr=0.2"
  ;;
mismatch-report)
  # Only rank 1 asks for a report: the gathering at the end would wait forever.
  timeout $limit "${mpirun[@]}" -n 1 "$tandem" train "${common[@]}" --steps 2 : \
    -n 1 "$tandem" train "${common[@]}" --steps 2 --report "$work/report.json" >"$work/out" 2>&1
  status=$?
  expect "ranks disagree on the configuration: rank 0 has report=false; rank 1 has report=true"
  ;;
mismatch-save)
  # Only rank 1 saves: its save's barriers would wait forever for rank 0.
  timeout $limit "${mpirun[@]}" -n 1 "$tandem" train "${common[@]}" --steps 2 : \
    -n 1 "$tandem" train "${common[@]}" --steps 2 --save-dir "$work/ckpt" >"$work/out" 2>&1
  status=$?
  expect "ranks disagree on the configuration: rank 0 has save_dir=false; rank 1 has save_dir=true"
  ;;
*)
  echo "unknown case '$case_name'"
  exit 2
  ;;
esac
seconds=$(($(date +%s) - start))
[ "$status" -ne 0 ] || fail "the job exited with status 0"
[ "$status" -ne 124 ] || fail "the job did not end by itself within $limit s"
[ "$seconds" -le $bound ] || fail "the job took $seconds s to end after its fault (bound $bound s)"
echo "PASS ($case_name): status $status after $seconds s"
