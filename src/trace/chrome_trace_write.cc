// Writing side of chrome_trace.h; the layout is documented there.
#include <map>
#include <string>
#include <utility>

#include "common/output_path.h"
#include "tandem/common/check.h"
#include "tandem/trace/chrome_trace.h"

namespace tandem::trace {
namespace {

using nlohmann::json;

// Fixed ids for the tracks the runtime uses, so every device lists them in the same order;
// other track names follow in order of first appearance.
std::map<std::string, int> track_ids(const Trace& trace) {
  std::map<std::string, int> ids{{"compute", 1}, {"comm", 2}, {"optimizer", 3}};
  int next = 4;
  for (const Span& span : trace.spans)
    if (ids.emplace(span.track, next).second) ++next;
  return ids;
}

json metadata_event(const char* name, int pid, int tid, json args) {
  return json{{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

json span_event(const Span& span, int tid) {
  json args{{"stage", span.stage},
            {"microbatch", span.microbatch},
            {"layers", span.layers},
            {"kind", std::string(1, span.kind)}};
  if (span.flow_out >= 0) args["flow_out"] = span.flow_out;
  if (span.flow_in >= 0) args["flow_in"] = span.flow_in;
  return json{{"ph", "X"},
              {"name", span.name},
              {"cat", std::string(1, span.kind)},
              {"pid", span.device},
              {"tid", tid},
              {"ts", span.start_us},
              {"dur", span.dur_us},
              {"args", std::move(args)}};
}

// A flow event bound to the span it points at: the midpoint lies inside the span, so both
// the "s" (bound to the slice open at ts) and the "f" with "bp":"e" (bound to the enclosing
// slice) attach to it.
json flow_event(const char* phase, const Span& span, int tid, long long id) {
  json event{{"ph", phase},
             {"name", "transfer"},
             {"cat", "flow"},
             {"id", id},
             {"pid", span.device},
             {"tid", tid},
             {"ts", span.start_us + span.dur_us / 2}};
  if (phase[0] == 'f') event["bp"] = "e";
  return event;
}

// Index of the span on each end of each flow id; rejects an id used twice on one end.
std::map<long long, std::pair<int, int>> flow_ends(const Trace& trace) {
  std::map<long long, std::pair<int, int>> ends;
  for (int i = 0; i < static_cast<int>(trace.spans.size()); ++i) {
    const Span& span = trace.spans[i];
    for (int side = 0; side < 2; ++side) {
      long long id = side == 0 ? span.flow_out : span.flow_in;
      if (id < 0) continue;
      auto& end = ends.emplace(id, std::make_pair(-1, -1)).first->second;
      int& slot = side == 0 ? end.first : end.second;
      TANDEM_CHECK(slot < 0,
                   "flow id {} {} both span \"{}\" and span \"{}\"; each send and each "
                   "receive needs its own flow id.",
                   id, side == 0 ? "leaves" : "enters", trace.spans[slot].name, span.name);
      slot = i;
    }
  }
  return ends;
}

}  // namespace

json to_chrome_json(const Trace& trace) {
  const std::map<int, std::string> devices = device_names(trace);
  const std::map<std::string, int> tracks = track_ids(trace);
  json events = json::array();
  for (const auto& [device, name] : devices) {
    events.push_back(metadata_event("process_name", device, 0, {{"name", name}}));
    events.push_back(metadata_event("process_sort_index", device, 0, {{"sort_index", device}}));
  }
  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> track name
  for (const Span& span : trace.spans)
    threads.emplace(std::make_pair(span.device, tracks.at(span.track)), span.track);
  for (const auto& [key, name] : threads) {
    events.push_back(metadata_event("thread_name", key.first, key.second, {{"name", name}}));
    events.push_back(
        metadata_event("thread_sort_index", key.first, key.second, {{"sort_index", key.second}}));
  }
  for (const Span& span : trace.spans) events.push_back(span_event(span, tracks.at(span.track)));
  for (const auto& [id, end] : flow_ends(trace)) {
    if (end.first < 0 || end.second < 0) continue;  // the other end lives in another rank's trace
    const Span& send = trace.spans[end.first];
    const Span& recv = trace.spans[end.second];
    events.push_back(flow_event("s", send, tracks.at(send.track), id));
    events.push_back(flow_event("f", recv, tracks.at(recv.track), id));
  }
  for (const Counter& c : trace.counters) {
    events.push_back(json{{"ph", "C"},
                          {"name", c.name},
                          {"pid", c.device},
                          {"tid", 0},
                          {"ts", c.ts_us},
                          {"args", {{"value", c.value}}}});
  }
  json other = json::object();
  for (const auto& [key, value] : trace.metadata) other[key] = value;
  return json{{"displayTimeUnit", "ms"},
              {"otherData", std::move(other)},
              {"traceEvents", std::move(events)}};
}

std::string chrome_trace_text(const Trace& trace) {
  const json doc = to_chrome_json(trace);
  // One event per line: still one JSON document, but greppable and diffable.
  std::string out = "{\"displayTimeUnit\":" + doc["displayTimeUnit"].dump() +
                    ",\"otherData\":" + doc["otherData"].dump() + ",\"traceEvents\":[\n";
  const json& events = doc["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i)
    out += events[i].dump() + (i + 1 < events.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

void write_chrome_trace(const Trace& trace, const std::string& path) {
  write_output_file(path, chrome_trace_text(trace));
}

}  // namespace tandem::trace
