#include "tandem/trace/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "scratch.h"
#include "tandem/common/check.h"

namespace tandem::trace {
namespace {

using nlohmann::json;

Span make_span(int device, std::string track, std::string name, char kind, int stage, int mb,
               double start, double dur) {
  Span s;
  s.device = device;
  s.device_name = "cpu:" + std::to_string(device);
  s.track = std::move(track);
  s.name = std::move(name);
  s.kind = kind;
  s.stage = stage;
  s.microbatch = mb;
  s.layers = "fc" + std::to_string(stage);
  s.start_us = start;
  s.dur_us = dur;
  return s;
}

// Device 0 runs 0F0 and sends to device 1, which receives and runs 1F0.
Trace two_device_trace() {
  Trace t;
  t.spans.push_back(make_span(0, "compute", "0F0", 'F', 0, 0, 0.0, 10.0));
  t.spans.push_back(make_span(0, "comm", "0F0>1", 'S', 0, 0, 10.0, 2.0));
  t.spans.push_back(make_span(1, "comm", "1F0<0", 'R', 1, 0, 9.0, 4.0));
  t.spans.push_back(make_span(1, "compute", "1F0", 'F', 1, 0, 13.0, 0.1 + 0.2));
  t.spans[1].flow_out = 7;
  t.spans[2].flow_in = 7;
  t.counters.push_back(Counter{0, "memory_bytes", 5.5, 1024});
  t.metadata["schedule"] = "gpipe";
  return t;
}

// Per process: suites of two checkouts may run at once on one machine.
std::string temp_path(const std::string& name) { return testing::scratch_path("tandem_", name); }

std::vector<json> events_with(const json& doc, const std::string& phase) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == phase) out.push_back(e);
  return out;
}

TEST(ChromeTrace, NamesProcessesAndThreads) {
  json doc = to_chrome_json(two_device_trace());
  int process_names = 0, thread_names = 0;
  for (const json& e : events_with(doc, "M")) {
    if (e["name"] == "process_name") {
      ++process_names;
      EXPECT_EQ(e["args"]["name"], "cpu:" + std::to_string(e["pid"].get<int>()));
    }
    if (e["name"] == "thread_name") {
      ++thread_names;
      EXPECT_EQ(e["args"]["name"], e["tid"] == 1 ? "compute" : "comm");
    }
  }
  EXPECT_EQ(process_names, 2);
  EXPECT_EQ(thread_names, 4);  // (compute, comm) on each device
  EXPECT_EQ(doc["otherData"]["schedule"], "gpipe");
}

TEST(ChromeTrace, CompleteEventCarriesArgs) {
  json doc = to_chrome_json(two_device_trace());
  auto spans = events_with(doc, "X");
  ASSERT_EQ(spans.size(), 4u);
  const json& first = spans[0];
  EXPECT_EQ(first["name"], "0F0");
  EXPECT_EQ(first["pid"], 0);
  EXPECT_EQ(first["tid"], 1);
  EXPECT_EQ(first["ts"], 0.0);
  EXPECT_EQ(first["dur"], 10.0);
  EXPECT_EQ(first["args"]["stage"], 0);
  EXPECT_EQ(first["args"]["microbatch"], 0);
  EXPECT_EQ(first["args"]["layers"], "fc0");
  EXPECT_EQ(spans[1]["tid"], 2);
  EXPECT_EQ(spans[1]["args"]["flow_out"], 7);
}

TEST(ChromeTrace, FlowArrowFromSendToReceive) {
  json doc = to_chrome_json(two_device_trace());
  auto starts = events_with(doc, "s");
  auto ends = events_with(doc, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0]["id"], 7);
  EXPECT_EQ(ends[0]["id"], 7);
  EXPECT_EQ(starts[0]["pid"], 0);
  EXPECT_EQ(starts[0]["tid"], 2);
  EXPECT_EQ(starts[0]["ts"], 11.0);  // inside the send span [10, 12]
  EXPECT_EQ(ends[0]["pid"], 1);
  EXPECT_EQ(ends[0]["ts"], 11.0);  // inside the receive span [9, 13]
  EXPECT_EQ(ends[0]["bp"], "e");
  EXPECT_EQ(starts[0]["name"], ends[0]["name"]);
  EXPECT_EQ(starts[0]["cat"], ends[0]["cat"]);
}

TEST(ChromeTrace, HalfAFlowDrawsNoArrow) {
  Trace t = two_device_trace();
  t.spans[2].flow_in = -1;
  json doc = to_chrome_json(t);
  EXPECT_TRUE(events_with(doc, "s").empty());
  EXPECT_TRUE(events_with(doc, "f").empty());
}

TEST(ChromeTrace, DuplicateFlowIdThrows) {
  Trace t = two_device_trace();
  t.spans[0].flow_out = 7;
  EXPECT_THROW(to_chrome_json(t), Error);
}

TEST(ChromeTrace, CounterEvents) {
  auto counters = events_with(to_chrome_json(two_device_trace()), "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]["name"], "memory_bytes");
  EXPECT_EQ(counters[0]["pid"], 0);
  EXPECT_EQ(counters[0]["ts"], 5.5);
  EXPECT_EQ(counters[0]["args"]["value"], 1024.0);
}

void expect_same(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.spans.size(), b.spans.size());
  for (std::size_t i = 0; i < a.spans.size(); ++i) {
    const Span& x = a.spans[i];
    const Span& y = b.spans[i];
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.device_name, y.device_name);
    EXPECT_EQ(x.track, y.track);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.stage, y.stage);
    EXPECT_EQ(x.microbatch, y.microbatch);
    EXPECT_EQ(x.layers, y.layers);
    EXPECT_EQ(x.start_us, y.start_us);  // exact: numbers are written without rounding
    EXPECT_EQ(x.dur_us, y.dur_us);
    EXPECT_EQ(x.flow_out, y.flow_out);
    EXPECT_EQ(x.flow_in, y.flow_in);
  }
  ASSERT_EQ(a.counters.size(), b.counters.size());
  for (std::size_t i = 0; i < a.counters.size(); ++i) {
    EXPECT_EQ(a.counters[i].device, b.counters[i].device);
    EXPECT_EQ(a.counters[i].name, b.counters[i].name);
    EXPECT_EQ(a.counters[i].ts_us, b.counters[i].ts_us);
    EXPECT_EQ(a.counters[i].value, b.counters[i].value);
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(ChromeTrace, FileRoundTripIsExact) {
  Trace t = two_device_trace();
  t.spans.push_back(make_span(1, "optimizer", "opt", 'O', -1, -1, 20.0, 1.0 / 3.0));
  const std::string path = temp_path("roundtrip.json");
  write_chrome_trace(t, path);
  expect_same(t, read_chrome_trace(path));
  std::remove(path.c_str());
}

TEST(ChromeTrace, ReadErrorsNameTheFile) {
  const std::string path = temp_path("broken.json");
  std::ofstream(path) << "{\"traceEvents\": [";
  try {
    read_chrome_trace(path);
    FAIL() << "expected tandem::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::ofstream(path) << "{\"events\": []}";
  EXPECT_THROW(read_chrome_trace(path), Error);
  std::remove(path.c_str());
  EXPECT_THROW(read_chrome_trace(temp_path("does_not_exist.json")), Error);
}

TEST(Merge, ShiftsSortsAndKeepsMetadata) {
  Trace rank0 = two_device_trace();
  rank0.metadata["rank"] = "0";
  Trace rank1;
  rank1.spans.push_back(make_span(2, "compute", "2F0", 'F', 2, 0, 0.0, 5.0));
  rank1.counters.push_back(Counter{2, "memory_bytes", 0.0, 8});
  rank1.metadata = {{"schedule", "gpipe"}, {"rank", "1"}};
  Trace merged = merge({rank0, rank1}, {0.0, 12.5});
  ASSERT_EQ(merged.spans.size(), 5u);
  EXPECT_EQ(merged.spans[3].name, "2F0");  // starts at 12.5: after 1F0<0 (9), before 1F0 (13)
  EXPECT_EQ(merged.spans[3].start_us, 12.5);
  EXPECT_EQ(merged.spans[4].name, "1F0");
  ASSERT_EQ(merged.counters.size(), 2u);
  EXPECT_EQ(merged.counters[1].ts_us, 12.5);
  EXPECT_EQ(merged.metadata, (std::map<std::string, std::string>{
                                 {"schedule", "gpipe"}, {"rank[0]", "0"}, {"rank[1]", "1"}}));
}

TEST(Merge, RejectsMismatchedInputs) {
  Trace a = two_device_trace();
  Trace b = two_device_trace();
  b.spans[0].device_name = "r1 cpu:0";
  b.spans[1].device_name = "r1 cpu:0";
  EXPECT_THROW(merge({a, b}), Error);
  EXPECT_THROW(merge({a, a}, {1.0}), Error);
  EXPECT_EQ(merge({a, a}).spans.size(), 8u);  // same device names: rows are shared
}

}  // namespace
}  // namespace tandem::trace
