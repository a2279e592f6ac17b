#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/trace/event.h"

namespace tandem::trace {
namespace {

TEST(Recorder, ConcurrentAddsAreAllKept) {
  Recorder recorder;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&recorder, t] {
      for (int i = 0; i < 1000; ++i) {
        Span span;
        span.device = t;
        span.microbatch = i;
        recorder.add(span);
        recorder.add(Counter{t, "memory_bytes", recorder.now_us(), double(i)});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Trace trace = recorder.take();
  EXPECT_EQ(trace.spans.size(), 4000u);
  EXPECT_EQ(trace.counters.size(), 4000u);
  std::vector<int> per_device(4, 0);
  for (const Span& span : trace.spans) ++per_device[span.device];
  EXPECT_EQ(per_device, std::vector<int>(4, 1000));
}

TEST(Recorder, TakeEmptiesAndClockKeepsRunning) {
  Recorder recorder;
  recorder.set_metadata("schedule", "1f1b");
  recorder.add(Span{});
  const double before = recorder.now_us();
  Trace first = recorder.take();
  EXPECT_EQ(first.spans.size(), 1u);
  EXPECT_EQ(first.metadata.at("schedule"), "1f1b");
  Trace second = recorder.take();
  EXPECT_TRUE(second.spans.empty());
  EXPECT_TRUE(second.metadata.empty());
  EXPECT_GE(recorder.now_us(), before);
}

// The span covers exactly its scope, on the recorder's clock: it starts between the readings
// just before and inside the scope, and ends between a reading 1 ms into the scope (reached by
// watching the clock, not by sleeping) and one after it.
TEST(ScopedSpan, RecordsItsDuration) {
  Recorder recorder;
  const double before = recorder.now_us();
  double inside = 0, late = 0;
  {
    Span span;
    span.name = "1F3";
    ScopedSpan scoped(recorder, span);
    inside = recorder.now_us();
    do {
      late = recorder.now_us();
    } while (late < inside + 1000);
  }
  const double after = recorder.now_us();
  Trace trace = recorder.take();
  ASSERT_EQ(trace.spans.size(), 1u);
  const Span& s = trace.spans[0];
  EXPECT_EQ(s.name, "1F3");
  EXPECT_GE(s.start_us, before);
  EXPECT_LE(s.start_us, inside);
  EXPECT_GE(s.start_us + s.dur_us, late);
  EXPECT_LE(s.start_us + s.dur_us, after);
  EXPECT_GE(s.dur_us, 1000.0);
}

TEST(DeviceNames, FallbackAndConflict) {
  Trace trace;
  Span a;
  a.device = 0;
  a.device_name = "cpu:0";
  Span b;
  b.device = 1;  // no name
  trace.spans = {a, b};
  trace.counters.push_back(Counter{3, "memory_bytes", 0, 1});
  auto names = device_names(trace);
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "cpu:0"}, {1, "device 1"}, {3, "device 3"}}));

  Span c = a;
  c.device_name = "cuda:0";
  trace.spans.push_back(c);
  EXPECT_THROW(device_names(trace), Error);
}

}  // namespace
}  // namespace tandem::trace
