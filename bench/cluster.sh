#!/usr/bin/env bash
# 4 stages on 2 simulated hosts (scripts/cluster) against the same 4 ranks on one host, with the
# hosts' links shaped: unshaped, 10 Gbit/s with 50 us, 1 Gbit/s with 500 us. Also the bytes a
# training step moves over each host's link. Prints Markdown. Needs root.
# Usage: bench/cluster.sh BUILD_DIR [REPEATS]; CLUSTER_MODEL=unet3d measures a 3D U-Net of 64^3
# volumes in 2 stages (one rank per host) instead of the mlp in 4.
#
# Shaping: each host's own end of its link (eth0 in its namespace) gets `netem rate R delay D`
# on egress, so every packet between two hosts passes exactly one shaped queue: one-way latency
# D, each host sending at most R. Ranks on one host talk over that host's loopback and never
# touch the link, so the one-host runs are the same whatever the shaping. A kernel without
# netem (sch_netem) gets the rate from a token bucket (tbf) on each host's eth0, and the delay
# from bench/link_delay.c: host 2's link leaves the bridge and a user-space relay passes its
# frames to and from the bridge D later, so that every packet between the hosts is delayed
# once. The relay wakes up later than asked on a busy machine; the table gives by how much.
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
read -r -a links <<<"$CLUSTER_LINKS"
prefix=$(cat "$CLUSTER_DIR/prefix")
relay_pid=""
cc -O2 -o "$build/link_delay" "$here/link_delay.c"
relay_log=$(mktemp)
trap '[ -z "$relay_pid" ] || kill "$relay_pid" 2>/dev/null; rm -f "$relay_log"' EXIT
if [ "${CLUSTER_MODEL:-mlp}" = unet3d ]; then
  ranks=2 steps=6 short=3 long=9 batch=2
  model=(train --model unet3d --levels 3 --filters 8 --volume 64 --data spheres --test-samples 2
    --schedule 1f1b --microbatches 2 --batch "$batch" --optimizer adam --progress none --seed 0
    --threads-per-device 1)
  crossing="the U-Net's tensors that cross from stage 0 to stage 1 (activations and skips
of 2 micro-batches of one 64^3 sample) and their gradients back"
else
  ranks=4 steps=20 short=10 long=30 batch=256
  model=(train --model mlp --width 1024 --blocks 8 --data mnist --schedule 1f1b --microbatches 8
    --batch "$batch" --optimizer adam --progress none --seed 0 --threads-per-device 1)
  crossing="one stage boundary (stage 1 to 2): per step each direction carries 256 x 1024
floats, 1048576 bytes of tensors (activations from host 1, their gradients from host 2)"
fi
per_host=$((ranks / 2))
split="${hosts[0]}:$per_host,${hosts[1]}:$per_host"
one="${hosts[0]}:$ranks"
export OMP_WAIT_POLICY=passive

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }
# samples_per_s HOSTS STEPS: one run's samples/s over its training steps: the samples over the
# result line's seconds (0.01 s), finer than its samples_per_s (0.1, coarse for the U-Net's 1.4).
samples_per_s() {
  "$CLUSTER_MPIRUN" --host "$1" -n "$ranks" -x OMP_WAIT_POLICY "$build/tandem" "${model[@]}" --steps "$2" \
    2>/dev/null | sed -n 's/^.*result:.* seconds=\([0-9.]*\).*/\1/p' |
    awk -v n="$(($2 * batch))" '{ printf "%.2f\n", n / $1 }'
}
# delay_link US | delay_link none: host 2's link through link_delay (US microseconds each
# way), or back on the bridge. The relay's pair of links is listed with the cluster's, so
# taking the cluster down removes it whatever happens here.
delay_link() {
  local v=${links[1]} d="${prefix}d" e="${prefix}e"
  if [ -n "$relay_pid" ]; then
    kill "$relay_pid"
    wait "$relay_pid" || true
    relay_pid=""
    ip link del "$d"
    ip link set "$v" master "${prefix}b"
  fi
  [ "$1" = none ] && return 0
  ip link set "$v" nomaster
  ip link add "$d" type veth peer name "$e"
  echo "$d" >>"$CLUSTER_DIR/links"
  ip link set "$e" master "${prefix}b" up
  ip link set "$d" up
  : >"$relay_log"
  "$build/link_delay" "$v" "$d" "$1" >/dev/null 2>"$relay_log" &
  relay_pid=$!
}
# relay_late: how late, on average, the relay let frames go (after it stopped).
relay_late() { sed -n 's/.*left \([0-9.]*\) us after their time on average.*/\1/p' "$relay_log"; }
# shape RATE DELAY | shape none: the queue on every host's end of its link, and the delay
# between the hosts. Sets `shaped` to how the link was shaped.
shape() {
  local ns how="unshaped (veth)" relay=0
  delay_link none
  for ns in "${namespaces[@]}"; do
    ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    [ "$1" = none ] && continue
    if ip netns exec "$ns" tc qdisc add dev eth0 root netem rate "$1" delay "$2" 2>/dev/null; then
      how="$1, $2 one way (netem)"
    else
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$1" burst 1mb latency 50ms
      how="$1 (tbf), $2 one way (link_delay)"
      relay=1
    fi
  done
  [ $relay = 0 ] || delay_link "${2%us}"
  shaped=$how
}
# link_bytes NS: bytes sent and received on the host's link so far ("TX RX").
link_bytes() {
  ip -n "$1" -s link show eth0 | awk '/TX:/ { getline; tx = $1 } /RX:/ { getline; rx = $1 }
    END { print tx, rx }'
}

echo "### $ranks stages of ${model[2]} on 2 hosts against one host (simulated, scripts/cluster)"
echo
echo "Command: \`CLUSTER_MODEL=${CLUSTER_MODEL:-mlp} bench/cluster.sh $shown_build $repeats\`: inside"
echo "\`scripts/cluster run 2\`, \`mpirun --host H1:$per_host,H2:$per_host -n $ranks tandem ${model[*]}"
echo "--steps $steps\` (the first half of the stages on one host, the rest on the other) against"
echo "\`--host H1:$ranks\`; TCP only in both (ob1, tcp and self btls);"
echo "$repeats runs each, alternating; samples/s: the training steps' samples over the result line's"
echo "seconds (training steps only, 0.01 s; finer than its samples_per_s, 0.1). The"
echo "last column is the median of each pair's ratio (a 2-host run against the 1-host run just"
echo "before it), which a machine's slow drift moves less than the ratio of the medians."
echo "Each host's link is shaped on its egress with \`tc qdisc add dev eth0 root netem rate R delay D\`,"
echo "or, on a kernel without netem, \`tbf rate R burst 1mb latency 50ms\` and host 2's frames"
echo "relayed D later each way by bench/link_delay.c (late by the scheduler's wake-up, as shown)."
echo
echo "| link | 1 host samples/s (min-max) | 2 hosts samples/s (min-max) | 2 hosts / 1 host | per pair (min-max) |"
echo "|---|---|---|---|---|"
for shaping in "none -" "10gbit 50us" "1gbit 500us"; do
  read -r rate delay <<<"$shaping"
  shape "$rate" "$delay"
  label=$shaped
  a=() b=() pairs=()
  for ((r = 0; r < repeats; r++)); do
    a+=("$(samples_per_s "$one" "$steps")")
    b+=("$(samples_per_s "$split" "$steps")")
    pairs+=("$(awk -v a="${a[r]}" -v b="${b[r]}" 'BEGIN { printf "%.3f", b / a }')")
  done
  if [ -n "$relay_pid" ]; then
    delay_link none
    label="$label, frames $(relay_late) us late on average"
  fi
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  echo "| $label | $ma ($(printf '%s\n' "${a[@]}" | minmax)) | $mb ($(printf '%s\n' "${b[@]}" | minmax)) |" \
    "$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", b / a }') |" \
    "$(printf '%s\n' "${pairs[@]}" | median) ($(printf '%s\n' "${pairs[@]}" | minmax)) |"
done
shape none

# Bytes per step: the links' counters around a short and a long run; the difference leaves out
# start, configuration checks and the final evaluation, the same in both.
declare -A before after
for n in "$short" "$long"; do
  for ns in "${namespaces[@]}"; do before[$ns.$n]=$(link_bytes "$ns"); done
  samples_per_s "$split" "$n" >/dev/null
  for ns in "${namespaces[@]}"; do after[$ns.$n]=$(link_bytes "$ns"); done
done
span=$((long - short))
echo
echo "Bytes per training step on each host's link (the counters' difference between a $long-step"
echo "and a $short-step run on 2 hosts, over $span steps):"
echo
echo "| host | sent per step | received per step |"
echo "|---|---|---|"
for i in "${!namespaces[@]}"; do
  ns=${namespaces[$i]}
  read -r tsa rsa <<<"${before[$ns.$short]}"
  read -r tsb rsb <<<"${after[$ns.$short]}"
  read -r tla rla <<<"${before[$ns.$long]}"
  read -r tlb rlb <<<"${after[$ns.$long]}"
  echo "| host $((i + 1)) (stages $((per_host * i))-$((per_host * i + per_host - 1))) |" \
    "$(( ((tlb - tla) - (tsb - tsa)) / span )) |" \
    "$(( ((rlb - rla) - (rsb - rsa)) / span )) |"
done
echo
echo "What crosses the hosts: $crossing; the rest is message headers, TCP/IP framing and"
echo "acknowledgements."
