#!/usr/bin/env python3
"""`tandem train --timeline` read back as a picture, against the schedule and the trace.

usage: timeline_check.py TANDEM WORKDIR

For each case below, trains 3 steps with one traced step (--trace-steps 1) and writes both
--trace and --timeline, then checks the SVG:
  - it parses as XML, its root is an <svg> element, and it has one row (an idle band and a
    device label) per device, in device order;
  - every action of the traced step has exactly one box, on the row of the device that runs its
    stage: the boxes of a row are the actions of that device's list in the lowered schedule
    (`tandem schedule --lowered`, sends and receives included), computes in the tall band and
    sends and receives in the thin one; after them, one "optimizer" box in the tall band (the
    optimizer's step, which comes after every action of the step);
  - the boxes stand in time order: walking a device's list, each box starts no earlier than the
    one before, and compute boxes do not overlap;
  - each box sits where the trace puts its span: x = idle.x + (ts - first) / (last - first) *
    idle.width, to the SVG's 2 decimals (0.011 px, the rounding of both numbers);
  - its fill is its kind's legend colour (forwards blue, backwards green, ...).
The cases: 1F1B on 4 devices (one stage each) and zb-v on 2 devices, where device 0 runs
stages 0 and 3 and the backward is split into I and W.
"""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
CASES = [  # (schedule, devices)
    ("1f1b", 4),
    ("zb-v", 2),
]
PX = 0.011  # two decimals on each side of a comparison of SVG coordinates


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(command):
    shown = " ".join(command)
    done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    if done.returncode != 0:
        fail(f"'{shown}' exited with {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def lowered_rows(tandem, schedule, devices):
    """Each device's action list of the lowered schedule, as `tandem schedule` prints it."""
    out = run([tandem, "schedule", "--schedule", schedule, "--stages", str(devices),
               "--microbatches", "4", "--lowered"])
    grids = re.findall(r"^name=.*\n((?:d\d+ \|.*\n)+)", out, re.M)
    if len(grids) != 2:
        fail(f"expected a compute grid and a lowered grid from tandem schedule:\n{out}")
    return [line.split("|", 1)[1].split() for line in grids[1].splitlines()]


def boxes_by_row(root):
    """{row: [(name, x, width, fill, band)]} from rect.span elements, rows by their idle band."""
    idle = [r for r in root.iter(SVG + "rect") if r.get("class") == "idle"]
    names = [t.text for t in root.iter(SVG + "text") if t.get("class") == "device"]
    if not idle or len(idle) != len(names):
        fail(f"{len(idle)} idle bands but {len(names)} device labels")
    tops = [int(r.get("y")) for r in idle]
    height = int(idle[0].get("height"))
    rows = {i: [] for i in range(len(idle))}
    for rect in root.iter(SVG + "rect"):
        if rect.get("class") != "span":
            continue
        title = rect.find(SVG + "title")
        if title is None or not title.text:
            fail("a box without its <title>")
        name = title.text.split(" ")[0]
        y = int(rect.get("y"))
        if y in tops:
            row, band = tops.index(y), "compute"
        elif y - height - 2 in tops:
            row, band = tops.index(y - height - 2), "comm"
        else:
            fail(f"box {name} at y={y} is on no row (rows at {tops})")
        rows[row].append((name, float(rect.get("x")), float(rect.get("width")),
                          rect.get("fill"), band))
    return idle, names, rows


def legend_colours(root):
    """{legend word: fill} of the legend's swatches, read from their order in the document."""
    out = {}
    nodes = list(root)
    for i, node in enumerate(nodes):
        if node.tag == SVG + "rect" and node.get("class") == "legend":
            out[nodes[i + 1].text] = node.get("fill")
    return out


KIND_WORD = {"F": "forward", "B": "backward", "I": "backward (input)",
             "W": "backward (weight)", ">": "send", "<": "receive", "optimizer": "optimizer"}


def kind_of(name):
    """The legend word of an action name: 1F3, 2I0, 1F3>2 (send), 2F3<1 (receive), optimizer."""
    if name in KIND_WORD:
        return KIND_WORD[name]
    for arrow in "<>":
        if arrow in name:
            return KIND_WORD[arrow]
    return KIND_WORD[re.match(r"\d+([FBIW])\d+$", name).group(1)]


def check_case(tandem, work, schedule, devices):
    trace_path = os.path.join(work, f"timeline_{schedule}.json")
    svg_path = os.path.join(work, f"timeline_{schedule}.svg")
    for path in (trace_path, svg_path):
        if os.path.exists(path):
            os.remove(path)
    run([tandem, "train", "--schedule", schedule, "--devices", str(devices), "--microbatches",
         "4", "--batch", "32", "--steps", "3", "--trace-steps", "1", "--eval-batch", "5000",
         "--progress", "none", "--trace", trace_path, "--timeline", svg_path])
    expected = [row + ["optimizer"] for row in lowered_rows(tandem, schedule, devices)]

    try:
        root = ET.parse(svg_path).getroot()
    except ET.ParseError as e:
        fail(f"{svg_path} is not well-formed XML: {e}")
    if root.tag != SVG + "svg" or float(root.get("width")) <= 0:
        fail(f"the root element is {root.tag} with width {root.get('width')}")
    idle, names, rows = boxes_by_row(root)
    if names != [f"cpu:{d}" for d in range(devices)]:
        fail(f"rows {names}, want cpu:0 .. cpu:{devices - 1}")

    with open(trace_path) as f:
        spans = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    first = min(e["ts"] for e in spans)
    last = max(e["ts"] + e["dur"] for e in spans)
    span_of = {(e["pid"], e["name"]): e for e in spans}
    colours = legend_colours(root)

    for d in range(devices):
        got = {name: (x, w, fill, band) for name, x, w, fill, band in rows[d]}
        if len(got) != len(rows[d]) or sorted(got) != sorted(expected[d]):
            fail(f"{schedule} row cpu:{d} has boxes {sorted(n for n, *_ in rows[d])}, "
                 f"want one per action of its list {sorted(expected[d])}")
        x0, width = float(idle[d].get("x")), float(idle[d].get("width"))
        previous, compute_end = None, None
        for name in expected[d]:
            x, w, fill, band = got[name]
            want_band = "comm" if re.search(r"[<>]", name) else "compute"
            if band != want_band:
                fail(f"{name} is drawn in the {band} band of cpu:{d}, not the {want_band} band")
            span = span_of[(d, name)]
            want_x = x0 + (span["ts"] - first) / (last - first) * width
            if abs(x - want_x) > PX:
                fail(f"{name} on cpu:{d} is at x={x}, but its span at {span['ts']} us puts it at "
                     f"{want_x:.3f}")
            want_w = max(span["dur"] / (last - first) * width, 0.5)  # svg.cc: hairline 0.5 px
            if abs(w - want_w) > 2 * PX:
                fail(f"{name} on cpu:{d} is {w} px wide, but its span of {span['dur']} us makes "
                     f"{want_w:.3f}")
            if previous is not None and x < previous[1] - PX:
                fail(f"cpu:{d}: {name} (x={x}) is drawn before {previous[0]} (x={previous[1]}), "
                     f"which comes first in its list")
            previous = (name, x)
            if band == "compute":
                if compute_end is not None and x < compute_end - PX:
                    fail(f"cpu:{d}: compute box {name} at x={x} overlaps the one before, which "
                         f"ends at {compute_end}")
                # Where the span ends, not the box: a span shorter than half a pixel is drawn
                # as a 0.5 px hairline, which may reach past the next box's start.
                compute_end = x0 + (span["ts"] + span["dur"] - first) / (last - first) * width
            if colours.get(kind_of(name)) != fill:
                fail(f"{name} is filled {fill}, but the legend shows {kind_of(name)} as "
                     f"{colours.get(kind_of(name))}")
    print(f"{schedule} on {devices} devices: "
          f"{sum(len(r) for r in rows.values())} boxes, each on its device's row, in its list's "
          f"order, where the trace puts it")


def main():
    if len(sys.argv) != 3:
        fail("usage: timeline_check.py TANDEM WORKDIR")
    tandem, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for schedule, devices in CASES:
        check_case(tandem, work, schedule, devices)


if __name__ == "__main__":
    main()
