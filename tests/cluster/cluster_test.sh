#!/usr/bin/env bash
# `tandem train` across simulated hosts (scripts/cluster: network namespaces on a bridge, so
# ranks on different hosts talk over TCP only), checked from outside the job.
#   pipeline   4 stages on 2 hosts x 2 ranks: the parameters after 4 steps are bitwise those
#              of the same 4 ranks on one host, and the loss and held-out accuracy are the same
#   replicas   2 stages x 2 replicas on 2 hosts x 2 ranks (one replica per host, so the
#              gradient all-reduce crosses hosts): the same comparison
#   resume     a run stopped after 2 of 4 steps on 2 hosts x 2 ranks, its checkpoint folder seen
#              by both hosts, resumed on 1 host x 4 ranks: bitwise the uninterrupted run's
#              parameters (and the step-2 parameters differ, so the check can fail)
#   link-cut   the link of host 2 goes down mid-run: the job ends on every host with a non-zero
#              status, the waiting rank's report (what it waited for, from which rank, the
#              schedule grid) and no process left in any namespace, within --comm-timeout
#              plus 30 s of the cut
#   rank-kill  a rank on host 2 is killed: the same, and mpirun names the killed rank
#   plan       `tandem plan` on 2 hosts x 2 ranks with the link to host 2 held to 200 Mbit/s
#              (tc tbf, towards host 2 only): the messages it plans with are the slow link's
#              (8 MiB take 335 ms towards host 2 at that rate, so half a round trip 168 ms or
#              more), where on 1 host x 4 ranks they take less than half of that
#   checks     six `scripts/cluster check` at once, three times (as when ctest starts several
#              cluster tests together): each finds namespaces usable; none takes another's probe
# Bitwise, not within a tolerance: every layer sees the same micro-batches with the same dropout
# masks in the same order whatever the placement and transport (as tests/cli/mpi_resume.cmake).
# Usage: cluster_test.sh CASE TANDEM. Status 77 (skipped) where namespaces cannot be made.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../scripts/cluster
case_name=$1
tandem=$2

if [ "${CLUSTER_DIR:-}" = "" ]; then
  if ! why=$("$cluster" check); then
    echo "SKIP: $why"
    exit 77
  fi
  if [ "$case_name" = checks ]; then
    failed=0
    for _ in 1 2 3; do
      pids=()
      for _ in 1 2 3 4 5 6; do "$cluster" check & pids+=($!); done
      for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
    done
    [ $failed = 0 ] || { echo "FAIL: $failed of 18 checks side by side refused"; exit 1; }
    echo "PASS: 18 checks side by side, 6 at a time"
    exit 0
  fi
  exec "$cluster" run 2 -- "$0" "$@"
fi

# Inside the cluster from here on: CLUSTER_* describe it.
read -r -a hosts <<<"$CLUSTER_HOSTS"
read -r -a namespaces <<<"$CLUSTER_NS"
read -r -a links <<<"$CLUSTER_LINKS"
h1=${hosts[0]}
h2=${hosts[1]}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--batch 32 --microbatches 4 --eval-batch 5000 --seed 3 --progress none
        --lr-schedule constant --comm-timeout 60)

fail() {
  echo "FAIL ($case_name): $*"
  exit 1
}
# on HOSTS OUT ARGS...: tandem ARGS on mpirun --host HOSTS with 4 ranks, output to OUT; must
# succeed within 240 s.
on() {
  local hosts=$1 out=$2
  shift 2
  echo "\$ mpirun --host $hosts -n 4 tandem $*"
  timeout 240 "$CLUSTER_MPIRUN" --host "$hosts" -n 4 "$tandem" "$@" >"$out" 2>&1
  local status=$?
  grep "result:" "$out"
  [ $status = 0 ] || { cat "$out"; fail "exited with status $status"; }
}
# result_of OUT: the result line's steps, loss and held-out accuracy.
result_of() {
  grep -oE "result: steps=[^ ]+ loss=[^ ]+ test_accuracy=[^ ]+" "$1" ||
    { cat "$1"; fail "$1 has no result line"; }
}
# consolidate DIR: the unsplit parameters of the checkpoint folder DIR, as DIR.pt.
consolidate() {
  "$tandem" consolidate "$1" -o "$1.pt" >/dev/null || fail "consolidate $1 failed"
}
# same_runs SPLIT_HOSTS ONE_HOST ARGS...: ARGS on both layouts give the same result line and
# bitwise the same parameters.
same_runs() {
  local split=$1 one=$2
  shift 2
  on "$split" "$work/split.out" train "${common[@]}" --steps 4 --save-dir "$work/split" "$@"
  on "$one" "$work/one.out" train "${common[@]}" --steps 4 --save-dir "$work/one" "$@"
  [ "$(result_of "$work/split.out")" = "$(result_of "$work/one.out")" ] ||
    fail "2 hosts and 1 host differ: '$(result_of "$work/split.out")' against '$(result_of "$work/one.out")'"
  consolidate "$work/split"
  consolidate "$work/one"
  cmp -s "$work/split.pt" "$work/one.pt" || fail "the parameters on 2 hosts and on 1 host differ"
}
# pids_in_cluster: the processes still running in any host's namespace.
pids_in_cluster() {
  local ns
  for ns in "${namespaces[@]}"; do ip netns pids "$ns"; done
}
# broken: a long run on 2 hosts x 2 ranks with --comm-timeout 30; once it trains,
# `break_it` breaks it. The job must end, and every namespace be empty, within 60 s of the break.
broken() {
  local deadline=60
  timeout 240 "$CLUSTER_MPIRUN" --host "$h1:2,$h2:2" -n 4 "$tandem" train --model mlp \
    --width 64 --blocks 2 --batch 64 --microbatches 4 --epochs 100 --progress line \
    --comm-timeout 30 >"$work/out" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do
    grep -qE "^step [0-9]+/" "$work/out" && break
    kill -0 $job 2>/dev/null || break
    sleep 0.2
  done
  grep -qE "^step [0-9]+/" "$work/out" || { cat "$work/out"; fail "the job never trained"; }
  local broke
  broke=$(date +%s)
  break_it
  wait $job
  status=$?
  local ended=$(($(date +%s) - broke))
  until [ -z "$(pids_in_cluster)" ] || [ $(($(date +%s) - broke)) -gt $deadline ]; do
    sleep 0.2
  done
  local left
  left=$(pids_in_cluster | xargs -r ps -o pid=,comm= -p | tr '\n' ' ')
  cat "$work/out"
  [ "$status" -ne 0 ] || fail "the job exited with status 0"
  [ "$status" -ne 124 ] || fail "the job did not end by itself within 240 s"
  [ "$ended" -le $deadline ] || fail "the job ended $ended s after the break, not within $deadline s"
  [ -z "$left" ] || fail "processes left in the hosts $deadline s after the break: $left"
  echo "the job ended with status $status, $ended s after the break"
}

case $case_name in
pipeline)
  same_runs "$h1:2,$h2:2" "$h1:4"
  ;;
replicas)
  same_runs "$h1:2,$h2:2" "$h1:4" --replicas 2
  ;;
resume)
  on "$h1:2,$h2:2" "$work/full.out" train "${common[@]}" --steps 4 --save-dir "$work/full"
  on "$h1:2,$h2:2" "$work/first.out" train "${common[@]}" --steps 2 --save-dir "$work/cut" \
    --save-every 1 --keep 0
  on "$h2:4" "$work/rest.out" train "${common[@]}" --steps 4 --resume "$work/cut" \
    --save-dir "$work/cut" --keep 0
  consolidate "$work/full"
  consolidate "$work/cut"
  consolidate "$work/cut/step-2"
  cmp -s "$work/full.pt" "$work/cut.pt" ||
    fail "resumed on 1 host, the parameters differ from the uninterrupted run's"
  ! cmp -s "$work/full.pt" "$work/cut/step-2.pt" ||
    fail "the parameters after 2 and after 4 steps are equal: the check cannot fail"
  ;;
link-cut)
  break_it() { ip link set "${links[1]}" down; }
  broken
  grep -qE "waited 30 s for message .* from rank [0-9] and it did not arrive" "$work/out" ||
    fail "no rank reports the message it waited for and from which rank"
  grep -qE '^\[r[0-9]/4\] step [0-9]+ failed on device [0-9] \(cpu:[0-9]\), stage [0-9], action' \
    "$work/out" || fail "no rank-prefixed report of the step, device, stage and action that waited"
  grep -qE '^ +\^$' "$work/out" || fail "no schedule grid with the waiting action marked"
  ;;
rank-kill)
  break_it() {
    local pid victim=""
    for pid in $(ip netns pids "${namespaces[1]}"); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = tandem ] && victim=$pid && break
    done
    [ -n "$victim" ] || fail "no tandem process on host 2"
    kill -KILL "$victim"
  }
  broken
  grep -qE "process rank [23] with PID [0-9]+ on node $h2 exited on signal 9" "$work/out" ||
    fail "mpirun does not name the killed rank on host 2"
  ;;
plan)
  # copy_of OUT: the microseconds the plan in OUT gives a receiver for 8 MiB.
  copy_of() {
    grep -oE "8\.0 MiB in [0-9]+ us" "$1" | head -1 | grep -oE "[0-9]+ us" | grep -oE "[0-9]+" ||
      { cat "$1"; fail "$1 plans no copy of 8 MiB"; }
  }
  plan=(plan --model mlp --width 64 --batch 8 --train-samples 64 --test-samples 16 --repeats 1
        --top 3 --comm-timeout 60)
  on "$h1:4" "$work/one.out" "${plan[@]}"
  tc qdisc add dev "${links[1]}" root tbf rate 200mbit burst 64kb latency 2s ||
    fail "cannot hold host 2's link to 200 Mbit/s"
  on "$h1:2,$h2:2" "$work/split.out" "${plan[@]}"
  grep -E "^messages between 4 ranks over MPI" "$work/one.out" "$work/split.out"
  one=$(copy_of "$work/one.out")
  split=$(copy_of "$work/split.out")
  [ "$split" -ge 120000 ] ||
    fail "on 2 hosts 8 MiB are planned at $split us, under the slow link's 168000 and more"
  [ "$one" -lt 60000 ] ||
    fail "on 1 host 8 MiB are planned at $one us: the check cannot tell the links apart"
  grep -q "chosen: mpirun -n 4 tandem train" "$work/split.out" || fail "no chosen command line"
  ;;
*)
  echo "unknown case '$case_name'"
  exit 2
  ;;
esac
echo "PASS ($case_name)"
