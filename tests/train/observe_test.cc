// Traces of real steps: every device has forward and backward events, every send has its
// receive, events on one track never overlap, and the count of compute events is
// stages x micro-batches x phases x steps. The trace is checked after a round trip through
// the Chrome JSON file, as a viewer would read it.
#include "tandem/train/observe.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "../runtime/test_models.h"
#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/schedule/all.h"
#include "tandem/trace/chrome_trace.h"
#include "tandem/trace/svg.h"
#include "tandem/train/trainer.h"

namespace tandem {
namespace {

struct Traced {
  trace::Trace trace;
  std::vector<train::StepReport> reports;
};

Traced run(const std::string& schedule, int stages, int microbatches, int steps) {
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(stages), 1);
  o.schedule = schedule;
  o.microbatches = microbatches;
  graph::Model m = testing::small_mlp();
  auto part = graph::partition_by_parameters(m, stages);
  runtime::Pipeline p(std::move(m), part, o);
  Traced t;
  torch::Tensor x = torch::randn({32, 12}), y = torch::randint(5, {32});
  for (int s = 0; s < steps; ++s) {
    auto stats = p.forward_backward(x, y);
    train::add_step_spans(t.trace, p, p.last_timings(), s, stats.started_us);
    t.reports.push_back(train::analyze_step(p, p.last_timings(), 32));
  }
  return t;
}

TEST(Trace, MeasuredStepsReadBackWithEveryPropertyAViewerNeeds) {
  for (std::string schedule : {"gpipe", "1f1b", "zb-h1"}) {
    const int stages = 4, mbs = 4, steps = 2;
    Traced t = run(schedule, stages, mbs, steps);
    const auto path = std::filesystem::temp_directory_path() /
                      ("tandem_trace_" + std::to_string(::getpid()) + "_" + schedule + ".json");
    trace::write_chrome_trace(t.trace, path.string());
    trace::Trace back = trace::read_chrome_trace(path.string());
    std::filesystem::remove(path);

    std::map<int, std::set<char>> kinds;
    std::map<long long, int> flows;  // +1 send, -1 receive
    std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> tracks;
    int compute = 0;
    for (const auto& s : back.spans) {
      kinds[s.device].insert(s.kind);
      if (s.flow_out >= 0) flows[s.flow_out] += 1;
      if (s.flow_in >= 0) flows[s.flow_in] -= 1;
      if (s.track == "compute") ++compute;
      tracks[{s.device, s.track}].push_back({s.start_us, s.start_us + s.dur_us});
    }
    const bool split = schedule == "zb-h1";
    for (int d = 0; d < stages; ++d) {
      EXPECT_TRUE(kinds[d].count('F')) << schedule << " device " << d << " has no forward";
      EXPECT_TRUE(kinds[d].count(split ? 'I' : 'B'))
          << schedule << " device " << d << " has no backward";
    }
    EXPECT_FALSE(flows.empty());
    for (auto [id, balance] : flows)
      EXPECT_EQ(balance, 0) << schedule << ": flow " << id << " unmatched";
    for (auto& [key, spans] : tracks) {
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) {
        EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-3)
            << schedule << " device " << key.first << " track " << key.second << " overlaps";
      }
    }
    EXPECT_EQ(compute, stages * mbs * (split ? 3 : 2) * steps) << schedule;
  }
}

// The report of a step whose timings are known: GPipe on 3 stages with 6 micro-batches, every
// F 1 ms and every B 2 ms, timed as the simulator lays them out. Both bubbles are then the
// textbook (p-1)/(m+p-1) = 2/8 (simulate_test.cc): measured from the timings, and predicted by
// feeding their per-action means back to the simulator. Each device computes 18 of the 24 ms.
// The FLOPs are 3 x the forward's (B counts twice) for the batch of 32: the small MLP's
// layers 12x16, 16x16, 16x16 and 16x5 make 2 x 784 per sample.
TEST(Trace, ReportOfKnownTimingsHasTheTextbookBubble) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("3", 1);
  o.schedule = "gpipe";
  o.microbatches = 6;
  graph::Model m = testing::small_mlp();
  auto part = graph::partition_by_parameters(m, 3);
  runtime::Pipeline p(std::move(m), part, o);
  const schedule::Schedule s = schedule::compute_only(p.schedule());
  const schedule::Timeline t =
      schedule::simulate(s, schedule::StageGraph::chain(3), schedule::Costs::uniform(3, 1, 2));
  ASSERT_EQ(t.makespan, 24.0);
  std::vector<runtime::ActionTiming> timings;
  for (const auto& a : t.actions)
    timings.push_back({a.device, a.action, 1000 * a.start, 1000 * a.end});

  const train::StepReport r = train::analyze_step(p, timings, 32);
  EXPECT_DOUBLE_EQ(r.seconds, 0.024);
  EXPECT_DOUBLE_EQ(r.measured_bubble, 0.25);
  EXPECT_DOUBLE_EQ(r.predicted_bubble, 0.25);
  EXPECT_EQ(r.busy, std::vector<double>(3, 0.75));
  EXPECT_EQ(r.comm, std::vector<double>(3, 0.0));
  EXPECT_EQ(r.flops, 3.0 * 2 * 784 * 32);

  // Device 2's actions all 10 ms later (it ends at 30 ms instead of 20): the measured bubble
  // grows to 1 - 3 x 18 / (3 x 30), the prediction from the same per-action times does not.
  for (auto& timing : timings) {
    if (timing.device == 2) timing.start_us += 10000, timing.end_us += 10000;
  }
  const train::StepReport late = train::analyze_step(p, timings, 32);
  EXPECT_DOUBLE_EQ(late.seconds, 0.030);
  EXPECT_DOUBLE_EQ(late.measured_bubble, 0.4);
  EXPECT_DOUBLE_EQ(late.predicted_bubble, 0.25);
}

// The same report of real steps: its numbers hang together (the measured bubble is what the
// devices did not compute, every device was busy, no device is more than fully occupied).
TEST(Trace, ReportOfMeasuredStepsIsConsistent) {
  Traced t = run("gpipe", 3, 6, 2);
  for (const auto& r : t.reports) {
    EXPECT_GT(r.seconds, 0);
    ASSERT_EQ(r.busy.size(), 3u);
    double busy = 0;
    for (int d = 0; d < 3; ++d) {
      EXPECT_GT(r.busy[d], 0);
      EXPECT_LE(r.busy[d] + r.comm[d], 1 + 1e-9);
      busy += r.busy[d];
    }
    EXPECT_NEAR(r.measured_bubble, 1 - busy / 3, 1e-12);
    EXPECT_GT(r.predicted_bubble, 0);  // 3 stages, 6 micro-batches: never bubble-free
    EXPECT_LT(r.predicted_bubble, 1);
    EXPECT_EQ(r.flops, 3.0 * 2 * 784 * 32);
  }
}

// A simulated timeline becomes spans in the measured format, 1 ms per cost unit, and the SVG
// draws one box per span (its tooltip naming the action) on one row per device.
// A training step's time takes in what follows its actions: on each device that leads a
// stage's group of slabs, the gradients' sums and then the optimizer's step, each after every
// action of the step; the other devices of a group have neither. A trace shows both phases.
TEST(Trace, AStepsTimeTakesInItsGradientSumsAndItsOptimizer) {
  train::Config c;
  c.model = "conv3d-stack";
  c.data = "regression";
  c.volume = 8;
  c.convs = 2;
  c.filters = 4;
  c.devices = "4";  // 2 stages of 2 slabs: devices 0 and 2 lead
  c.spatial = 2;
  c.threads_per_device = 1;
  c.batch = 4;
  c.microbatches = 2;
  c.train_samples = 8;
  c.test_samples = 0;
  c.steps = 2;
  c.progress = trace::Progress::Mode::kNone;
  train::Trainer t(c);
  int steps = 0;
  t.run([&](int64_t step, int64_t, const runtime::StepStats& s, double) {
    ++steps;
    const runtime::Pipeline& p = t.pipeline();
    double actions_end = 0;
    for (const runtime::ActionTiming& a : p.last_timings())
      actions_end = std::max(actions_end, a.end_us);
    std::map<int, std::string> kinds;  // by device, in the order they ran
    std::map<int, double> last_end;
    for (const runtime::PhaseTiming& ph : p.last_phases()) {
      EXPECT_GE(ph.start_us, actions_end) << "step " << step << " device " << ph.device;
      EXPECT_GE(ph.start_us, last_end[ph.device]) << "step " << step << " device " << ph.device;
      EXPECT_GE(ph.end_us, ph.start_us);
      EXPECT_LE(ph.end_us, s.seconds * 1e6) << "step " << step << ": the step's seconds end "
                                            << "before its phase " << ph.kind;
      kinds[ph.device] += ph.kind;
      last_end[ph.device] = ph.end_us;
    }
    EXPECT_EQ(kinds, (std::map<int, std::string>{{0, "GO"}, {2, "GO"}})) << "step " << step;
    trace::Trace traced;
    train::add_phase_spans(traced, p, p.last_phases(), s.started_us);
    ASSERT_EQ(traced.spans.size(), 4u);
    for (const trace::Span& span : traced.spans) {
      EXPECT_EQ(span.track, span.kind == 'O' ? "optimizer" : "comm");
      EXPECT_EQ(span.name, span.kind == 'O' ? "optimizer" : "gradient sums");
      EXPECT_EQ(span.device_name, p.devices()[span.device].name);
    }
  });
  EXPECT_EQ(steps, 2);
}

TEST(Trace, SimulatedTimelineUsesTheSameFormat) {
  schedule::Schedule s = schedule::gpipe(4, 8);
  schedule::Timeline tl =
      schedule::simulate(s, schedule::StageGraph::chain(4), schedule::Costs::uniform(4));
  trace::Trace tr = train::simulated_trace(s, tl);
  ASSERT_EQ(tr.spans.size(), 4u * 8 * 2);
  ASSERT_EQ(tl.actions.size(), tr.spans.size());
  for (size_t i = 0; i < tr.spans.size(); ++i) {
    const trace::Span& span = tr.spans[i];
    const schedule::TimedAction& a = tl.actions[i];
    EXPECT_EQ(span.name, schedule::to_string(a.action));
    EXPECT_EQ(span.device, a.device);
    EXPECT_EQ(span.track, "compute");
    EXPECT_EQ(span.kind, static_cast<char>(a.action.op));
    EXPECT_EQ(span.start_us, 1000 * a.start);
    EXPECT_EQ(span.dur_us, 1000 * (a.end - a.start));
  }
  const std::string svg = trace::render_svg(tr, {});
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count("<rect class=\"span\""), tr.spans.size());
  EXPECT_EQ(count("<rect class=\"idle\""), 4u);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(count(fmt::format(">device {}</text>", d)), 1u) << d;
  for (const auto& span : tr.spans) EXPECT_EQ(count("<title>" + span.name + " "), 1u) << span.name;
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

// Devices that share a GPU count one memory: listed once, with its devices; CPU devices each
// count their own.
TEST(MemoryPeaks, ASharedGpuOnceAndEachCpuDevice) {
  const c10::Device gpu(c10::kCUDA, 0), cpu(c10::kCPU);
  const std::vector<DeviceSpec> devices = {
      {"cuda:0", gpu, 1}, {"cpu:0", cpu, 1}, {"cuda:0", gpu, 1}, {"cpu:1", cpu, 1}};
  const auto peaks = train::memory_peaks(devices, {700, 5, 700, 0});
  ASSERT_EQ(peaks.size(), 3u);
  EXPECT_EQ(peaks[0].name, "cuda:0");
  EXPECT_EQ(peaks[0].peak_bytes, 700u);
  EXPECT_EQ(peaks[0].devices, (std::vector<int>{0, 2}));
  EXPECT_EQ(peaks[1].name, "cpu:0");
  EXPECT_EQ(peaks[1].peak_bytes, 5u);
  EXPECT_EQ(peaks[1].devices, (std::vector<int>{1}));
  EXPECT_EQ(peaks[2].name, "cpu:1");
  EXPECT_EQ(peaks[2].peak_bytes, 0u);
  EXPECT_EQ(peaks[0].label, "cuda:0");
  EXPECT_EQ(peaks[0].rank, -1);
}

TEST(MemoryPeaks, UnderMpiOneMemoryPerRankAlsoWhenRanksShareAGpu) {
  // Two replicas of two stage devices: ranks 0..3 run devices 0,1,0,1. Each rank's vector
  // holds its own device's peak (the other entries are 0 or stale and must not be read).
  const c10::Device gpu(c10::kCUDA, 0), cpu(c10::kCPU);
  const std::vector<DeviceSpec> devices = {{"cuda:0", gpu, 1}, {"cpu:1", cpu, 1}};
  const auto peaks =
      train::memory_peaks_of_ranks(devices, {{100, 999}, {999, 20}, {300, 0}, {0, 40}});
  ASSERT_EQ(peaks.size(), 4u);
  const std::vector<std::string> labels = {"cuda:0@r0", "cpu:1@r1", "cuda:0@r2", "cpu:1@r3"};
  const std::vector<uint64_t> bytes = {100, 20, 300, 40};
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(peaks[q].rank, q);
    EXPECT_EQ(peaks[q].label, labels[q]);
    EXPECT_EQ(peaks[q].name, devices[q % 2].name);
    EXPECT_EQ(peaks[q].peak_bytes, bytes[q]);
    EXPECT_EQ(peaks[q].devices, (std::vector<int>{q % 2}));
  }
  // One rank per device: the device's name alone.
  const auto single = train::memory_peaks_of_ranks(devices, {{7, 0}, {0, 8}});
  EXPECT_EQ(single[0].label, "cuda:0");
  EXPECT_EQ(single[1].label, "cpu:1");
  EXPECT_EQ(single[1].peak_bytes, 8u);
}

}  // namespace
}  // namespace tandem
