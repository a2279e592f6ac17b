"""The memory plan against the measured peak, as a user meets them: `tandem train --plan-only`
prints each stage's planned peak, and the same command trained for two steps (the optimizer's
state exists from the first step on) prints each device's measured peak. For every layout
given, no device of a stage may exceed the stage's peak "at most" (what any timing of the
schedule allows: a budget set to it is never exceeded), and the planned peak may be at most
10% above the measured one (1 MiB for models of a few MiB): a plan worth following.

Usage: plan_check.py TANDEM -- TRAIN_ARGS... -- LAYOUT [-- LAYOUT ...]
where each LAYOUT is extra train options, e.g. `--devices 2 --spatial 2`.
Exit status 0 when every stage holds, 1 otherwise (each stage printed with its numbers); 77 (a
skip for ctest) when a run is refused because this processor's kernels cannot compute the
--precision asked for."""
import re
import subprocess
import sys

TOLERANCE = 1.10
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 2 and "cannot compute in" in done.stderr:
        print("SKIP: " + done.stderr.strip())
        sys.exit(77)
    if done.returncode != 0:
        sys.exit(f"plan_check: {' '.join(cmd)} ended with status {done.returncode}:\n"
                 f"{done.stdout}{done.stderr}")
    return done.stdout


def planned_peaks(text):
    """Per stage, (planned peak, peak at most) in bytes: the memory plan's "planned:" line."""
    m = re.search(r"^planned: peak_bytes=([0-9,]+) at_most_bytes=([0-9,]+)$", text, re.M)
    if not m:
        sys.exit("plan_check: no memory plan in:\n" + text)
    planned = [int(v) for v in m.group(1).split(",")]
    at_most = [int(v) for v in m.group(2).split(",")]
    return dict(enumerate(zip(planned, at_most)))


def balance(text):
    """The layers per stage of the placement table ("0  cpu:0  conv0..conv3 (4) ..."), for the
    training run to take the plan's split: the default split by measured time can differ
    between two runs."""
    counts = {}
    for stage, count in re.findall(r"^(\d+) +cpu:\d+ +\S+ \((\d+)\)", text, re.M):
        counts.setdefault(int(stage), int(count))
    if not counts:
        sys.exit("plan_check: no placement table in:\n" + text)
    return ",".join(str(counts[s]) for s in sorted(counts))


def measured_peaks(text):
    """Per device index, the result line's peak_mem_cpu:N."""
    line = next((l for l in text.splitlines() if l.startswith("result:")), None)
    if line is None:
        sys.exit("plan_check: no result line in:\n" + text)
    return {int(d): int(b) for d, b in re.findall(r"peak_mem_cpu:(\d+)=(\d+)", line)}


def option(layout, name, default):
    return int(layout[layout.index(name) + 1]) if name in layout else default


def main():
    args = sys.argv[1:]
    tandem, rest = args[0], args[2:]
    parts, current = [], []
    for a in rest:
        if a == "--":
            parts.append(current)
            current = []
        else:
            current.append(a)
    parts.append(current)
    train, layouts = parts[0], parts[1:]
    failed = False
    for layout in layouts:
        planning = run([tandem, "train", *train, *layout, "--plan-only"])
        plan = planned_peaks(planning)
        split = [] if "--balance" in train + layout or "--partition" in train + layout else [
            "--balance", balance(planning)]
        peaks = measured_peaks(run([tandem, "train", *train, *layout, *split, "--steps", "2",
                                    "--progress", "none"]))
        spatial = option(layout, "--spatial", 1)
        for stage, (planned, at_most) in sorted(plan.items()):
            # Stage s runs on group s: devices s*spatial .. s*spatial + spatial - 1.
            measured = max(peaks[d] for d in range(stage * spatial, (stage + 1) * spatial))
            # Never above what any timing allows; the planned peak (what a budget is checked
            # against) at most 10% above the measured one, or 1 MiB for models of a few MiB.
            ok = measured <= at_most and planned <= max(TOLERANCE * measured, measured + 2**20)
            failed |= not ok
            print(f"{' '.join(layout)}: stage {stage} planned {planned / 2**20:.2f} MiB (at most "
                  f"{at_most / 2**20:.2f}), measured {measured / 2**20:.2f} MiB, planned / "
                  f"measured {planned / measured:.3f}{'' if ok else '  <-- outside'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
