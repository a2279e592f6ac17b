// Reading side of chrome_trace.h: rebuilds a Trace from what to_chrome_json writes.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "tandem/common/check.h"
#include "tandem/trace/chrome_trace.h"

namespace tandem::trace {
namespace {

using nlohmann::json;

template <typename T>
T get_or(const json& object, const char* key, T fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return it->get<T>();
}

struct Names {
  std::map<int, std::string> processes;                // pid -> device name
  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> track name
};

Names collect_names(const json& events) {
  Names names;
  for (const json& event : events) {
    if (get_or<std::string>(event, "ph", "") != "M") continue;
    const std::string kind = get_or<std::string>(event, "name", "");
    const json args = get_or<json>(event, "args", json::object());
    const int pid = get_or<int>(event, "pid", 0);
    if (kind == "process_name") names.processes[pid] = get_or<std::string>(args, "name", "");
    if (kind == "thread_name")
      names.threads[{pid, get_or<int>(event, "tid", 0)}] = get_or<std::string>(args, "name", "");
  }
  return names;
}

Span read_span(const json& event, const Names& names) {
  Span span;
  span.device = get_or<int>(event, "pid", 0);
  const int tid = get_or<int>(event, "tid", 0);
  auto process = names.processes.find(span.device);
  if (process != names.processes.end()) span.device_name = process->second;
  auto thread = names.threads.find({span.device, tid});
  span.track = thread != names.threads.end() ? thread->second : "tid " + std::to_string(tid);
  span.name = get_or<std::string>(event, "name", "");
  span.start_us = get_or<double>(event, "ts", 0.0);
  span.dur_us = get_or<double>(event, "dur", 0.0);
  const json args = get_or<json>(event, "args", json::object());
  const std::string kind = get_or<std::string>(args, "kind", "");
  if (!kind.empty()) span.kind = kind[0];
  span.stage = get_or<int>(args, "stage", -1);
  span.microbatch = get_or<int>(args, "microbatch", -1);
  span.layers = get_or<std::string>(args, "layers", "");
  span.flow_out = get_or<long long>(args, "flow_out", -1);
  span.flow_in = get_or<long long>(args, "flow_in", -1);
  return span;
}

}  // namespace

Trace from_chrome_json(const json& doc) {
  TANDEM_CHECK(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
               "not a Chrome trace: expected a JSON object with a \"traceEvents\" array.");
  const json& events = doc["traceEvents"];
  Trace trace;
  try {
    const Names names = collect_names(events);
    for (const json& event : events) {
      const std::string phase = get_or<std::string>(event, "ph", "");
      if (phase == "X") trace.spans.push_back(read_span(event, names));
      if (phase != "C") continue;
      const json args = get_or<json>(event, "args", json::object());
      for (const auto& [key, value] : args.items()) {
        if (!value.is_number()) continue;
        std::string name = get_or<std::string>(event, "name", "");
        if (key != "value") name += " " + key;  // a series not written by tandem
        trace.counters.push_back(Counter{get_or<int>(event, "pid", 0), name,
                                         get_or<double>(event, "ts", 0.0), value.get<double>()});
      }
    }
    const json other = get_or<json>(doc, "otherData", json::object());
    for (const auto& [key, value] : other.items())
      trace.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
  } catch (const json::exception& e) {
    TANDEM_CHECK(false, "malformed Chrome trace event: {}", e.what());
  }
  return trace;
}

Trace read_chrome_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.is_open(), "cannot open trace file \"{}\" for reading.", path);
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    TANDEM_CHECK(false, "trace file \"{}\" is not valid JSON: {}", path, e.what());
  }
  try {
    return from_chrome_json(doc);
  } catch (const Error& e) {
    TANDEM_CHECK(false, "trace file \"{}\": {}", path, e.what());
  }
  return {};  // not reached
}

}  // namespace tandem::trace
