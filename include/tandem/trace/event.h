// The trace event model, shared by measured runs (the runtime records into a Recorder) and by
// the schedule simulator (which fills a Trace directly): one format for both, so a predicted
// and a measured timeline can be written, drawn and compared by the same code.
//
// Times are microseconds. In a Recorder they count from the Recorder's construction on the
// steady clock; merge() (chrome_trace.h) shifts per-rank traces onto one clock.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::trace {

// One interval on one track of one device.
struct Span {
  int device = 0;           // row in the SVG, Chrome "pid"
  std::string device_name;  // "cpu:0", "r1 cuda:0"
  std::string track;        // "compute", "comm", "slabs", "optimizer"; Chrome "tid" (one per name)
  std::string name;         // action ("1F3", "1F3>2") or phase ("gradient sums", "optimizer")
  char kind = 'F';          // F, B, I, W; S send, R receive, X slab exchange, G gradient sums,
                            // O optimizer
  int stage = -1;           // -1: not tied to a stage
  int microbatch = -1;      // -1: not tied to a micro-batch
  std::string layers;       // e.g. "fc1..fc3"
  double start_us = 0;
  double dur_us = 0;
  // Flow ids link a send to its receive: the send sets flow_out = id, the receive flow_in = id.
  // -1: none. Each id leaves at most one span and enters at most one span.
  long long flow_out = -1;
  long long flow_in = -1;
};

// One sample of a per-device quantity over time, e.g. "memory_bytes".
struct Counter {
  int device = 0;
  std::string name;
  double ts_us = 0;
  double value = 0;
};

struct Trace {
  std::vector<Span> spans;
  std::vector<Counter> counters;
  std::map<std::string, std::string> metadata;  // e.g. schedule, partition, rank
};

// Every device that has a span or a counter, with its name: the first non-empty
// Span::device_name of that device, else "device N". Throws tandem::Error when two spans
// of one device carry different non-empty names.
std::map<int, std::string> device_names(const Trace& trace);

// Collects spans and counters from any number of threads.
// Thread-safe: every method may be called concurrently. Not copyable (owns a mutex).
class Recorder {
 public:
  Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Microseconds on the steady clock since this Recorder was constructed.
  double now_us() const;

  void add(Span span);
  void add(Counter counter);
  void set_metadata(const std::string& key, const std::string& value);

  // Returns everything recorded so far and leaves the Recorder empty (its clock keeps running).
  Trace take();

 private:
  const std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  Trace trace_;
};

// Times one span from construction to destruction and adds it to a Recorder: start_us and
// dur_us are filled in, the rest is the caller's. Not thread-safe itself; the Recorder is.
class ScopedSpan {
 public:
  ScopedSpan(Recorder& recorder, Span span);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Recorder& recorder_;
  Span span_;
};

}  // namespace tandem::trace
