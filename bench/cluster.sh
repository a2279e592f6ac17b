#!/usr/bin/env bash
# 4 stages on 2 simulated hosts (scripts/cluster) against the same 4 ranks on one host, with the
# hosts' links shaped: unshaped, 10 Gbit/s with 50 us, 1 Gbit/s with 500 us. Also the bytes a
# training step moves over each host's link. Prints Markdown. Needs root.
# Usage: bench/cluster.sh BUILD_DIR [REPEATS]
#
# Shaping: each host's own end of its link (eth0 in its namespace) gets `netem rate R delay D`
# on egress, so every packet between two hosts passes exactly one shaped queue: one-way latency
# D, each host sending at most R. Ranks on one host talk over that host's loopback and never
# touch the link, so the one-host runs are the same whatever the shaping. A kernel without
# netem (sch_netem) gets the rate alone, from a token bucket (tbf, with a burst of 16 of the
# 64 KiB segments veth passes), and the table says so: no qdisc but netem adds delay.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shown_build=${1:-build}
build=$(cd "$shown_build" && pwd)
repeats=${2:-5}
if [ "${CLUSTER_DIR:-}" = "" ]; then
  exec "$here/../scripts/cluster" run 2 -- "$0" "$shown_build" "$repeats"
fi
read -r -a hosts <<<"$CLUSTER_HOSTS"
read -r -a namespaces <<<"$CLUSTER_NS"
split="${hosts[0]}:2,${hosts[1]}:2"
one="${hosts[0]}:4"
model=(train --model mlp --width 1024 --blocks 8 --data mnist --schedule 1f1b --microbatches 8
  --batch 256 --optimizer adam --progress none --seed 0 --threads-per-device 1)
export OMP_WAIT_POLICY=passive

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }
# samples_per_s HOSTS STEPS: one run's samples/s from its result line.
samples_per_s() {
  "$CLUSTER_MPIRUN" --host "$1" -n 4 -x OMP_WAIT_POLICY "$build/tandem" "${model[@]}" --steps "$2" \
    2>/dev/null | sed -n 's/^.*result:.*samples_per_s=\([0-9.]*\).*/\1/p'
}
# shape RATE DELAY | shape none: the queue on every host's end of its link. Prints how the
# link was shaped.
shape() {
  local ns how="unshaped (veth)"
  for ns in "${namespaces[@]}"; do
    ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    [ "$1" = none ] && continue
    if ip netns exec "$ns" tc qdisc add dev eth0 root netem rate "$1" delay "$2" 2>/dev/null; then
      how="$1, $2 one way (netem)"
    else
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$1" burst 1mb latency 50ms
      how="$1, no added latency (tbf: this kernel has no netem, so not $2)"
    fi
  done
  echo "$how"
}
# link_bytes NS: bytes sent and received on the host's link so far ("TX RX").
link_bytes() {
  ip -n "$1" -s link show eth0 | awk '/TX:/ { getline; tx = $1 } /RX:/ { getline; rx = $1 }
    END { print tx, rx }'
}

echo "### 4 stages on 2 hosts against one host (simulated, scripts/cluster)"
echo
echo "Command: \`bench/cluster.sh $shown_build $repeats\`: inside \`scripts/cluster run 2\`,"
echo "\`mpirun --host H1:2,H2:2 -n 4 tandem ${model[*]} --steps 20\` (stages 0-1 on one host,"
echo "2-3 on the other) against \`--host H1:4\`; TCP only in both (ob1, tcp and self btls);"
echo "$repeats runs each, alternating; samples/s from the result line (training steps only)."
echo "Each host's link is shaped on its egress with \`tc qdisc add dev eth0 root netem rate R delay D\`,"
echo "or, on a kernel without netem, \`tbf rate R burst 1mb latency 50ms\` (the rate alone)."
echo
echo "| link | 1 host samples/s (min-max) | 2 hosts samples/s (min-max) | 2 hosts / 1 host |"
echo "|---|---|---|---|"
for shaping in "none -" "10gbit 50us" "1gbit 500us"; do
  read -r rate delay <<<"$shaping"
  label=$(shape "$rate" "$delay")
  a=() b=()
  for ((r = 0; r < repeats; r++)); do
    a+=("$(samples_per_s "$one" 20)")
    b+=("$(samples_per_s "$split" 20)")
  done
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  echo "| $label | $ma ($(printf '%s\n' "${a[@]}" | minmax)) | $mb ($(printf '%s\n' "${b[@]}" | minmax)) |" \
    "$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", b / a }') |"
done
shape none >/dev/null

# Bytes per step: the links' counters around a 10-step and a 30-step run; the difference over
# 20 steps leaves out start, configuration checks and the final evaluation, the same in both.
declare -A before after
for steps in 10 30; do
  for ns in "${namespaces[@]}"; do before[$ns.$steps]=$(link_bytes "$ns"); done
  samples_per_s "$split" "$steps" >/dev/null
  for ns in "${namespaces[@]}"; do after[$ns.$steps]=$(link_bytes "$ns"); done
done
echo
echo "Bytes per training step on each host's link (batch 256 of 8 micro-batches; the counters'"
echo "difference between a 30-step and a 10-step run on 2 hosts, over 20 steps):"
echo
echo "| host | sent per step | received per step |"
echo "|---|---|---|"
for i in "${!namespaces[@]}"; do
  ns=${namespaces[$i]}
  read -r t10a r10a <<<"${before[$ns.10]}"
  read -r t10b r10b <<<"${after[$ns.10]}"
  read -r t30a r30a <<<"${before[$ns.30]}"
  read -r t30b r30b <<<"${after[$ns.30]}"
  echo "| host $((i + 1)) (stages $((2 * i))-$((2 * i + 1))) |" \
    "$(( ((t30b - t30a) - (t10b - t10a)) / 20 )) |" \
    "$(( ((r30b - r30a) - (r10b - r10a)) / 20 )) |"
done
echo
echo "One stage boundary crosses the hosts (stage 1 to 2): per step each direction carries"
echo "256 x 1024 floats, 1048576 bytes of tensors (activations from host 1, their gradients"
echo "from host 2); the rest is message headers, TCP/IP framing and acknowledgements."
