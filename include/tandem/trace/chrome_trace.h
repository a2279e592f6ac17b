// Chrome trace JSON (the "JSON Object Format" read by chrome://tracing and ui.perfetto.dev).
//
// Layout of what to_chrome_json writes:
//   {"displayTimeUnit": "ms", "otherData": {metadata...}, "traceEvents": [...]}
//   M  process_name / process_sort_index per device  (pid = Span::device, name = device_name)
//   M  thread_name / thread_sort_index per (device, track)  (tid = one id per track name:
//      compute 1, comm 2, optimizer 3, other names 4, 5, ... in order of first appearance)
//   X  one complete event per span; args {stage, microbatch, layers, kind[, flow_out][, flow_in]}
//   s/f one flow pair ("bp":"e") per flow id that has both a send and a receive span, so the
//      viewer draws an arrow from the send to its receive
//   C  one counter event per Counter, args {"value": v}
// Times are microseconds, written as JSON numbers without rounding, so read_chrome_trace
// gives back exactly the Trace that was written (span order and counter order included),
// except that a span without a device_name comes back with the one device_names() gave it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tandem/trace/event.h"

namespace tandem::trace {

// Throws tandem::Error when spans of one device disagree on its name, or when a flow id
// leaves (or enters) more than one span.
nlohmann::json to_chrome_json(const Trace& trace);

// to_chrome_json as the text write_chrome_trace writes: one event per line.
std::string chrome_trace_text(const Trace& trace);

// to_chrome_json written to `path` whole (a temporary file renamed over it: a reader sees the old
// file or the new one); throws tandem::Error naming the path if it cannot be written.
void write_chrome_trace(const Trace& trace, const std::string& path);

// Inverse of to_chrome_json. Also accepts other Chrome traces: events it does not model
// (B/E, instant, async) are skipped, missing args take the Span defaults.
// Throws tandem::Error on malformed JSON or a missing "traceEvents" array.
Trace from_chrome_json(const nlohmann::json& json);

// from_chrome_json of the file at `path`; throws tandem::Error naming the path on failure.
Trace read_chrome_trace(const std::string& path);

// Puts per-rank traces on one clock: every time in traces[i] is shifted by clock_offsets_us[i]
// (empty offsets: no shift). Spans and counters are then sorted by time (stable).
// Devices keep their numbers; two traces that use one device number under two different
// names throw tandem::Error, because the rows would silently mix. Metadata with equal values
// merge; a key whose value differs between traces is kept per trace as "key[i]".
Trace merge(std::vector<Trace> traces, std::vector<double> clock_offsets_us = {});

}  // namespace tandem::trace
