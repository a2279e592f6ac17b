// Core benchmarks: tandem against a plain LibTorch training loop on the same model, data and
// threads; executor overhead per action; throughput against micro-batch count.
//
// Prints a table of medians over --repeats runs (with min-max) and ratios against the
// baseline measured in the same run. Usage: bench_core [--repeats N] [--steps N] [--quick]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/models/layers.h"
#include "tandem/models/mlp.h"
#include "tandem/runtime/pipeline.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median, min, max;
};

Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

struct Workload {
  int64_t width = 1024;
  int blocks = 8;
  int64_t batch = 256;
  int steps = 10;
};

tandem::graph::Model make_model(const Workload& w) {
  torch::manual_seed(0);
  tandem::models::MlpOptions o;
  o.width = w.width;
  o.blocks = w.blocks;
  o.dropout = 0.0;
  return tandem::models::mlp(o);
}

// Samples per second of a plain LibTorch loop: forward, backward, Adam, on the calling thread.
double plain_loop(const Workload& w, int threads, const torch::Tensor& x, const torch::Tensor& y) {
  at::set_num_threads(threads);
  tandem::set_blas_threads(threads);
  tandem::graph::Model m = make_model(w);
  std::vector<torch::Tensor> params;
  for (auto& l : m.layers)
    for (auto& p : tandem::graph::named_parameters(l)) params.push_back(p.second);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-4));
  auto run = [&] {
    opt.zero_grad();
    torch::Tensor h = x;
    for (auto& l : m.layers) h = l.forward({h})[0];
    m.loss(h, y).backward();
    opt.step();
  };
  run();  // warm-up
  auto t0 = Clock::now();
  for (int s = 0; s < w.steps; ++s) run();
  return w.steps * w.batch / std::chrono::duration<double>(Clock::now() - t0).count();
}

double tandem_loop(const Workload& w, int stages, int microbatches, const std::string& schedule,
                   int threads, const torch::Tensor& x, const torch::Tensor& y) {
  tandem::runtime::PipelineOptions o;
  o.devices = tandem::parse_devices(std::to_string(stages), threads);
  o.schedule = schedule;
  o.microbatches = microbatches;
  tandem::graph::Model m = make_model(w);
  auto part = tandem::graph::partition_by_parameters(m, stages);
  tandem::runtime::Pipeline p(std::move(m), part, o);
  p.set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-4));
  });
  auto run = [&] {
    p.forward_backward(x, y);
    p.optimizer_step();
  };
  run();
  auto t0 = Clock::now();
  for (int s = 0; s < w.steps; ++s) run();
  return w.steps * w.batch / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Microseconds of executor overhead per action: a model of near-empty layers, so the time of
// a step is almost all scheduling, messaging and bookkeeping.
double overhead_per_action_us(int stages, int microbatches, int steps) {
  torch::manual_seed(0);
  tandem::graph::Model m;
  m.name = "tiny";
  std::string prev = "input";
  for (int s = 0; s < stages; ++s) {
    std::string out = s == stages - 1 ? "output" : "t" + std::to_string(s);
    m.layers.push_back(tandem::models::linear_layer("l" + std::to_string(s), 4, 4, false, prev, out));
    prev = out;
  }
  m.loss = [](const torch::Tensor& o, const torch::Tensor&) { return o.pow(2).mean(); };
  tandem::runtime::PipelineOptions o;
  o.devices = tandem::parse_devices(std::to_string(stages), 1);
  o.schedule = "1f1b";
  o.microbatches = microbatches;
  auto part = tandem::graph::partition_by_parameters(m, stages);
  tandem::runtime::Pipeline p(std::move(m), part, o);
  torch::Tensor x = torch::randn({microbatches, 4}), y = torch::zeros({microbatches});
  p.forward_backward(x, y);
  size_t actions = 0;
  for (const auto& list : p.schedule().device_actions) actions += list.size();
  auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) p.forward_backward(x, y);
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  // Devices run in parallel: the step's wall time spread over the busiest device's actions.
  size_t busiest = 0;
  for (const auto& list : p.schedule().device_actions) busiest = std::max(busiest, list.size());
  (void)actions;
  return us / steps / busiest;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  Workload w;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) w.steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) { repeats = 3; w.steps = 3; w.width = 256; w.blocks = 2; }
    else { std::fprintf(stderr, "usage: bench_core [--repeats N] [--steps N] [--quick]\n"); return 2; }
  }
  const int cores = tandem::available_cores();
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({w.batch, 1, 28, 28});
  torch::Tensor y = torch::randint(10, {w.batch});
  std::printf("# bench_core: mlp width %lld, %d blocks, batch %lld, %d steps per run, %d runs, %d cores\n",
              static_cast<long long>(w.width), w.blocks, static_cast<long long>(w.batch), w.steps,
              repeats, cores);

  std::vector<double> base, one;
  for (int r = 0; r < repeats; ++r) {
    base.push_back(plain_loop(w, cores, x, y));
    one.push_back(tandem_loop(w, 1, 1, "sequential", cores, x, y));
  }
  Stats b = summarize(base), t1 = summarize(one);
  std::printf("\n| run | samples/s median | min-max | ratio to plain loop |\n|---|---|---|---|\n");
  std::printf("| plain LibTorch loop, %d threads | %.0f | %.0f-%.0f | 1.00 |\n", cores, b.median, b.min, b.max);
  std::printf("| tandem 1 stage, %d threads | %.0f | %.0f-%.0f | %.3f |\n", cores, t1.median, t1.min,
              t1.max, t1.median / b.median);
  for (int stages : {2, 4}) {
    for (int m : {1, 2, 4, 8, 16, 32}) {
      std::vector<double> v;
      for (int r = 0; r < repeats; ++r) v.push_back(tandem_loop(w, stages, m, "1f1b", 0, x, y));
      Stats s = summarize(v);
      std::printf("| tandem 1f1b %d stages, %d micro-batches | %.0f | %.0f-%.0f | %.3f |\n", stages,
                  m, s.median, s.min, s.max, s.median / b.median);
    }
  }
  std::printf("\n| executor overhead | us per action, median | min-max |\n|---|---|---|\n");
  for (int stages : {2, 4}) {
    std::vector<double> v;
    for (int r = 0; r < repeats; ++r) v.push_back(overhead_per_action_us(stages, 8, 200));
    Stats s = summarize(v);
    std::printf("| 1f1b, %d stages, 8 micro-batches, 4x4 linear layers | %.1f | %.1f-%.1f |\n", stages,
                s.median, s.min, s.max);
  }
  return 0;
}
