// Core benchmarks on the mlp (width 1024, 8 blocks, batch 256): tandem against a plain
// LibTorch training loop on the same model, data and threads; throughput against stage and
// micro-batch count, beside PyTorch's Pipe on the same configuration (results of
// bench/pipe_baseline.py); achieved FLOP/s against the measured matrix-multiply ceiling;
// executor overhead per action.
//
// Prints tables of medians over --repeats runs (with min-max) and ratios against baselines
// measured in the same run.
// Usage: bench_core [--repeats N] [--steps N] [--quick] [--baseline-only] [--pipe FILE]
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tandem/common/device.h"
#include "tandem/models/layers.h"
#include "tandem/models/mlp.h"
#include "tandem/runtime/pipeline.h"

namespace {

using namespace tandem::bench;

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

// The mlp as a user would write it in LibTorch: torch::nn modules, initialized as tandem's.
torch::nn::Sequential make_plain_model(const Workload& w) {
  torch::manual_seed(0);
  torch::nn::Sequential net{torch::nn::Flatten()};
  auto hidden = [&net](int64_t in, int64_t out) {
    torch::nn::Linear lin(in, out);
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_normal_(lin->weight, 0.0, torch::kFanIn, torch::kReLU);
    lin->bias.zero_();
    net->push_back(lin);
    net->push_back(torch::nn::ReLU());
  };
  hidden(784, w.width);
  for (int b = 0; b < 2 * w.blocks; ++b) hidden(w.width, w.width);
  net->push_back(torch::nn::Linear(w.width, 10));
  return net;
}

// Samples per second of a plain LibTorch loop over torch::nn modules: forward, backward,
// Adam, on the calling thread.
double plain_loop(const Workload& w, int threads, const torch::Tensor& x, const torch::Tensor& y) {
  set_threads(threads);
  torch::nn::Sequential net = make_plain_model(w);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-4));
  return samples_per_s(
      [&] {
        opt.zero_grad();
        torch::nn::functional::cross_entropy(net->forward(x), y).backward();
        opt.step();
      },
      w.steps, w.batch);
}

// The same loop over tandem's own layers (the kernels tandem runs, without its runtime).
double layers_loop(const Workload& w, int threads, const torch::Tensor& x, const torch::Tensor& y) {
  set_threads(threads);
  tandem::graph::Model m = make_model(w);
  std::vector<torch::Tensor> params;
  for (auto& l : m.layers)
    for (auto& p : tandem::graph::named_parameters(l)) params.push_back(p.second);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-4));
  return samples_per_s(
      [&] {
        opt.zero_grad();
        torch::Tensor h = x;
        for (auto& l : m.layers) h = l.forward({h})[0];
        m.loss(h, y).backward();
        opt.step();
      },
      w.steps, w.batch);
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
  return samples_per_s(
      [&] {
        p.forward_backward(x, y);
        p.optimizer_step();
      },
      w.steps, w.batch);
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
    m.layers.push_back(
        tandem::models::linear_layer("l" + std::to_string(s), 4, 4, false, prev, out));
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
  auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) p.forward_backward(x, y);
  const double us = seconds_since(t0) * 1e6;
  // Devices run in parallel: the step's wall time spread over the busiest device's actions.
  size_t busiest = 0;
  for (const auto& list : p.schedule().device_actions) busiest = std::max(busiest, list.size());
  return us / steps / busiest;
}

// The matrix-multiply ceiling: the best median FLOP/s of float32 GEMMs with the whole thread
// budget, over square products and the mlp's own three training products.
double print_ceiling(const Workload& w, int cores, int repeats) {
  const std::vector<GemmShape> shapes = {
      {"square 2048x2048 by 2048x2048", 2048, 2048, 2048},
      {"square 1024x1024 by 1024x1024", 1024, 1024, 1024},
      {"mlp forward: x[B,W] by weight[W,W] transposed", w.batch, w.width, w.width, true},
      {"mlp input gradient: g[B,W] by weight[W,W]", w.batch, w.width, w.width},
      {"mlp weight gradient: g[B,W] transposed by x[B,W]", w.width, w.batch, w.width},
  };
  std::printf(
      "\n| matrix multiply, float32, %d threads | GFLOP/s median | min-max |\n|---|---|---|\n",
      cores);
  double best = 0;
  for (const auto& g : shapes) {
    const Stats s = on_own_thread([&] { return gemm_flops_per_s(g, cores, repeats); });
    best = std::max(best, s.median);
    std::printf("| %s (B=%lld, W=%lld) | %.1f | %.1f-%.1f |\n", g.name.c_str(),
                static_cast<long long>(w.batch), static_cast<long long>(w.width), s.median / 1e9,
                s.min / 1e9, s.max / 1e9);
  }
  std::printf("\nCeiling: %.1f GFLOP/s (the best median above).\n", best / 1e9);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  bool baseline_only = false;
  std::string pipe_file;
  Workload w;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      w.steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--pipe") && i + 1 < argc)
      pipe_file = argv[++i];
    else if (!std::strcmp(argv[i], "--baseline-only"))
      baseline_only = true;
    else if (!std::strcmp(argv[i], "--quick")) {
      repeats = 3;
      w.steps = 3;
      w.width = 256;
      w.blocks = 2;
    } else {
      std::fprintf(stderr,
                   "usage: bench_core [--repeats N] [--steps N] [--quick] [--baseline-only] "
                   "[--pipe FILE]\n");
      return 2;
    }
  }
  const BaselineLines python(pipe_file);
  const int cores = tandem::available_cores();
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({w.batch, 1, 28, 28});
  torch::Tensor y = torch::randint(10, {w.batch});
  const double flops_per_sample = train_flops_per_sample(make_model(w));
  std::printf(
      "# bench_core: mlp width %lld, %d blocks, batch %lld, %d steps per run, %d runs, "
      "%d cores, OMP_WAIT_POLICY=%s\n",
      static_cast<long long>(w.width), w.blocks, static_cast<long long>(w.batch), w.steps, repeats,
      cores, omp_wait_policy().c_str());
  std::printf("# BLAS: %s; training FLOPs per sample (3x forward): %.1f M\n",
              blas_description().c_str(), flops_per_sample / 1e6);

  const double ceiling = baseline_only ? 0 : print_ceiling(w, cores, repeats);
  auto gflops = [&](double sps) { return sps * flops_per_sample / 1e9; };
  auto of_ceiling = [&](double sps) {
    return ceiling > 0
               ? std::to_string(static_cast<int>(100 * sps * flops_per_sample / ceiling + 0.5)) +
                     "%"
               : std::string("-");
  };

  // Interleaved, so that load from elsewhere on the machine falls on every variant alike.
  std::vector<double> plain, plain_main, layers, one;
  for (int r = 0; r < repeats; ++r) {
    plain.push_back(on_own_thread([&] { return plain_loop(w, cores, x, y); }));
    plain_main.push_back(plain_loop(w, cores, x, y));
    layers.push_back(on_own_thread([&] { return layers_loop(w, cores, x, y); }));
    one.push_back(tandem_loop(w, 1, 1, "sequential", cores, x, y));
  }
  const Stats b = summarize(plain), t1 = summarize(one);
  std::printf(
      "\n| run, %d threads | samples/s median | min-max | ratio to plain loop | GFLOP/s | of "
      "ceiling |\n"
      "|---|---|---|---|---|---|\n",
      cores);
  auto row = [&](const std::string& name, const Stats& s) {
    std::printf("| %s | %.0f | %.0f-%.0f | %.3f | %.1f | %s |\n", name.c_str(), s.median, s.min,
                s.max, s.median / b.median, gflops(s.median), of_ceiling(s.median).c_str());
  };
  row("plain LibTorch loop (torch::nn modules), own thread", b);
  row("plain LibTorch loop (torch::nn modules), main thread", summarize(plain_main));
  row("plain loop over tandem's layers, own thread", summarize(layers));
  row("tandem 1 stage", t1);
  if (const Stats* p = python.find("plain", "mlp", 1, 1))
    row("plain PyTorch loop (Python, bench/pipe_baseline.py)", *p);
  std::printf(
      "\nTarget, tandem 1 stage >= 0.97x the plain loop: %.3f (%s); against the loop over "
      "tandem's layers %.3f.\n",
      t1.median / b.median, t1.median >= 0.97 * b.median ? "met" : "not met",
      t1.median / summarize(layers).median);
  if (baseline_only) return 0;

  std::printf(
      "\n| tandem 1f1b | samples/s median | min-max | ratio to plain loop | of ceiling "
      "| Pipe samples/s median | Pipe min-max | tandem / Pipe |\n"
      "|---|---|---|---|---|---|---|---|\n");
  int compared = 0, twice = 0;
  double best = std::max(b.median, t1.median), worst_ratio = 0, best_ratio = 0;
  for (int stages : {2, 4}) {
    for (int m : {1, 2, 4, 8, 16, 32}) {
      std::vector<double> v;
      for (int r = 0; r < repeats; ++r) v.push_back(tandem_loop(w, stages, m, "1f1b", 0, x, y));
      const Stats s = summarize(v);
      best = std::max(best, s.median);
      std::printf("| %d stages, %d micro-batches | %.0f | %.0f-%.0f | %.3f | %s |", stages, m,
                  s.median, s.min, s.max, s.median / b.median, of_ceiling(s.median).c_str());
      if (const Stats* p = python.find("pipe", "mlp", stages, m)) {
        const double ratio = s.median / p->median;
        worst_ratio = compared ? std::min(worst_ratio, ratio) : ratio;
        best_ratio = std::max(best_ratio, ratio);
        ++compared;
        twice += ratio >= 2.0;
        std::printf(" %.0f | %.0f-%.0f | %.2f |\n", p->median, p->min, p->max, ratio);
      } else {
        std::printf(" - | - | - |\n");
      }
    }
  }
  if (compared > 0) {
    std::printf(
        "\nTarget, >= 2x Pipe at equal stages and micro-batches: met at %d of %d "
        "configurations (tandem / Pipe from %.2f to %.2f).\n",
        twice, compared, worst_ratio, best_ratio);
  }
  std::printf(
      "\nTarget, the mlp at >= 50%% of the matrix-multiply ceiling: best run %s of the "
      "ceiling (%s).\n",
      of_ceiling(best).c_str(), best * flops_per_sample >= 0.5 * ceiling ? "met" : "not met");
  std::printf("\n| executor overhead | us per action, median | min-max |\n|---|---|---|\n");
  for (int stages : {2, 4}) {
    std::vector<double> v;
    for (int r = 0; r < repeats; ++r) v.push_back(overhead_per_action_us(stages, 8, 200));
    Stats s = summarize(v);
    std::printf("| 1f1b, %d stages, 8 micro-batches, 4x4 linear layers | %.1f | %.1f-%.1f |\n",
                stages, s.median, s.min, s.max);
  }
  return 0;
}
