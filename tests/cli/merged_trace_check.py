#!/usr/bin/env python3
"""The trace rank 0 writes under MPI holds every rank's events on one clock.

usage: merged_trace_check.py OUT TANDEM [--replicas 2] MPIRUN...

Runs a 2-rank training with --trace OUT (with --replicas 2: 4 ranks, two replicas of 2 stages,
ranks 1 and 3 shifted, and every flow must stay within its replica). Rank 1 runs in its own
time namespace whose monotonic clock (the clock tandem's traces read) is 1000 s ahead of rank
0's (`unshare --time`, which needs root or CAP_SYS_ADMIN; without it both ranks share the
host's clock and the check is weaker: it then sees timestamps left on a rank's own step start,
not offsets applied wrongly).
Rank 0's merged file must then show:
  - every rank's device as a process ("r0 cpu:0", "r1 cpu:1", ...) and every flow matched: one
    "s" and one "f" per id, each on the span that carries that id (the replicas send the same
    messages, so their ids must differ);
  - one clock: every message's receive ends no earlier than its send starts, less 50 ms. The
    ranks' clocks differ by 1000 s and tandem moves rank 1's events by the offset it estimates
    (Cristian's method, off by at most half the best of 8 round trips: microseconds on one
    host, a scheduler slice under load); 50 ms leaves room for that and is 20,000 times smaller
    than what an offset that was not applied, or applied the wrong way, puts between the ranks;
  - the whole trace spans no longer than the run took.
"""

import json
import subprocess
import sys
import time

AHEAD_S = 1000
TOLERANCE_US = 50_000


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def time_namespace_works():
    try:
        done = subprocess.run(["unshare", "--time", "--monotonic", str(AHEAD_S), "true"],
                              capture_output=True, timeout=30)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main():
    if len(sys.argv) < 4:
        fail("usage: merged_trace_check.py OUT TANDEM [--replicas 2] MPIRUN...")
    out_path, tandem, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    replicas = 1
    if rest[:1] == ["--replicas"]:
        replicas, rest = int(rest[1]), rest[2:]
    mpirun = rest
    train = [tandem, "train", "--steps", "4", "--batch", "32", "--microbatches", "4",
             "--eval-batch", "5000", "--progress", "none", "--comm-timeout", "60", "--trace",
             out_path, "--devices", "2", "--replicas", str(replicas)]
    ahead = time_namespace_works()
    shifted = ["unshare", "--time", "--monotonic", str(AHEAD_S)] if ahead else []
    command = mpirun + ["-n", "1"] + train + [":", "-n", "1"] + shifted + train
    for _ in range(replicas - 1):
        command += [":", "-n", "1"] + train + [":", "-n", "1"] + shifted + train
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    took_us = (time.monotonic() - started) * 1e6
    if done.returncode != 0:
        fail(f"'{' '.join(command)}' exited with {done.returncode}\n{done.stdout}\n{done.stderr}")

    with open(out_path) as f:
        events = json.load(f)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"}
    want = [f"r{r} cpu:{r % 2}" for r in range(2 * replicas)]
    if sorted(processes.values()) != want:
        fail(f"processes {processes}, want {', '.join(want)}")
    spans = [e for e in events if e["ph"] == "X"]
    sends = {e["args"]["flow_out"]: e for e in spans if "flow_out" in e["args"]}
    receives = {e["args"]["flow_in"]: e for e in spans if "flow_in" in e["args"]}
    starts = sorted(e["id"] for e in events if e["ph"] == "s")
    finishes = sorted(e["id"] for e in events if e["ph"] == "f")
    if not sends or sorted(sends) != sorted(receives) or starts != sorted(sends) or \
            finishes != starts:
        fail(f"flows do not match: {len(sends)} sends, {len(receives)} receives, "
             f"{len(starts)} flow starts, {len(finishes)} flow ends")
    worst = None
    for flow, send in sends.items():
        receive = receives[flow]
        if send["pid"] == receive["pid"]:
            fail(f"flow {flow} stays on {processes[send['pid']]}")
        if send["pid"] // 2 != receive["pid"] // 2:
            fail(f"flow {flow} goes from {processes[send['pid']]} to "
                 f"{processes[receive['pid']]}, another replica")
        lag = receive["ts"] + receive["dur"] - send["ts"]
        if worst is None or lag < worst[0]:
            worst = (lag, send, receive)
    lag, send, receive = worst
    if lag < -TOLERANCE_US:
        fail(f"'{receive['name']}' on {processes[receive['pid']]} ends {-lag:.0f} us before "
             f"'{send['name']}' on {processes[send['pid']]} starts: the ranks' events are not on "
             f"one clock")
    first = min(e["ts"] for e in spans)
    last = max(e["ts"] + e["dur"] for e in spans)
    if first < 0 or last - first > took_us:
        fail(f"the trace spans {first:.0f}..{last:.0f} us, but the run took {took_us:.0f} us")
    clock = f"rank 1's clock {AHEAD_S} s ahead" if ahead else \
        "one shared clock (no time namespace: unshare --time needs root)"
    print(f"merged trace with {clock}: {len(sends)} flows, the tightest receive ends "
          f"{lag:.0f} us after its send starts; {last - first:.0f} us in all")


if __name__ == "__main__":
    main()
