// Core benchmarks on the mlp (width 1024, 8 blocks, batch 256): tandem against a plain
// LibTorch training loop on the same model, data and threads; throughput against stage and
// micro-batch count beside PyTorch's Pipe on the same configuration; achieved FLOP/s against
// the measured matrix-multiply ceiling; executor overhead per action.
//
// Every configuration runs --repeats times, in turn with its baselines (the Python ones in a
// child process, bench/pipe_baseline.py --serve) and with a short sample of the
// matrix-multiply ceiling, so that load from elsewhere on a shared machine falls on all of
// them alike. Prints tables of medians (with min-max) and ratios against those baselines.
//
// Usage: bench_core [--repeats N] [--steps N] [--quick] [--baseline-only]
//                   [--python INTERPRETER [--pipe-script PATH]]
#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "python_baseline.h"
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
  return pipeline_samples_per_s(make_model(w), stages, microbatches, schedule, threads, x, y,
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

// FLOP/s of float32 GEMMs of square shapes and of the mlp's own training products, each both
// ways of using the cores: one product with all of them as BLAS threads, and one product per
// core at once with one BLAS thread each (as tandem's stages multiply).
void print_gemm_table(const Workload& w, int cores, int repeats) {
  const int64_t b = w.batch, d = w.width;
  const std::vector<GemmShape> shapes = {
      {"square 2048x2048 by 2048x2048", 2048, 2048, 2048},
      {"square 1024x1024 by 1024x1024", 1024, 1024, 1024},
      {fmt::format("mlp forward: x[{},{}] by weight[{},{}] transposed", b, d, d, d), b, d, d, true},
      {fmt::format("mlp input gradient: g[{},{}] by weight[{},{}]", b, d, d, d), b, d, d},
      {fmt::format("mlp weight gradient: g[{},{}] transposed by x[{},{}]", b, d, b, d), d, b, d},
      {fmt::format("mlp forward of a 1/8 micro-batch: x[{},{}] by weight[{},{}] transposed", b / 8,
                   d, d, d),
       b / 8, d, d, true},
  };
  std::printf(
      "\n| matrix multiply, float32 | 1 product, %d BLAS threads: GFLOP/s median | min-max | %d "
      "products at once, 1 BLAS thread each | min-max |\n|---|---|---|---|---|\n",
      cores, cores);
  for (const auto& g : shapes) {
    const Stats one = gemm_flops_per_s(g, 1, cores, repeats);
    const Stats each = gemm_flops_per_s(g, cores, 1, repeats);
    std::printf("| %s | %.1f | %.1f-%.1f | %.1f | %.1f-%.1f |\n", g.name.c_str(), one.median / 1e9,
                one.min / 1e9, one.max / 1e9, each.median / 1e9, each.min / 1e9, each.max / 1e9);
  }
}

// Runs of one configuration of tandem and, where there is one, of its Python baseline.
struct Measured {
  std::string name;
  int stages = 1, microbatches = 1;
  std::vector<double> tandem, python;
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  bool baseline_only = false;
  std::string python, pipe_script = "bench/pipe_baseline.py";
  Workload w;
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (!std::strcmp(argv[i], "--repeats") && more) {
      repeats = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--steps") && more) {
      w.steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--python") && more) {
      python = argv[++i];
    } else if (!std::strcmp(argv[i], "--pipe-script") && more) {
      pipe_script = argv[++i];
    } else if (!std::strcmp(argv[i], "--baseline-only")) {
      baseline_only = true;
    } else if (!std::strcmp(argv[i], "--quick")) {
      repeats = 3;
      w.steps = 3;
      w.width = 256;
      w.blocks = 2;
    } else {
      std::fprintf(stderr,
                   "usage: bench_core [--repeats N] [--steps N] [--quick] [--baseline-only] "
                   "[--python INTERPRETER [--pipe-script PATH]]\n");
      return 2;
    }
  }
  const int cores = tandem::available_cores();
  std::unique_ptr<PythonBaseline> py;
  if (!python.empty()) {
    py = std::make_unique<PythonBaseline>(std::vector<std::string>{
        python, pipe_script, "--serve", "--model", "mlp", "--width", std::to_string(w.width),
        "--blocks", std::to_string(w.blocks), "--batch", std::to_string(w.batch), "--steps",
        std::to_string(w.steps), "--threads", std::to_string(cores)});
  }
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
  std::fflush(stdout);
  if (!baseline_only) print_gemm_table(w, cores, repeats);

  // The baselines and tandem's 1 stage, in turn.
  std::vector<double> plain, plain_main, layers, one, py_plain, probes;
  for (int r = 0; r < repeats; ++r) {
    plain.push_back(on_own_thread([&] { return plain_loop(w, cores, x, y); }));
    plain_main.push_back(plain_loop(w, cores, x, y));
    layers.push_back(on_own_thread([&] { return layers_loop(w, cores, x, y); }));
    one.push_back(tandem_loop(w, 1, 1, "sequential", cores, x, y));
    if (py) py_plain.push_back(py->ask_number("plain"));
    if (!baseline_only) probes.push_back(gemm_probe(cores));
  }
  // Pipelines: tandem 1F1B and Pipe on the same stages and micro-batches, in turn.
  std::vector<Measured> sweep;
  if (!baseline_only) {
    for (int stages : {2, 4}) {
      for (int m : {1, 4, 8, 16, 32}) {
        Measured c{fmt::format("{} stages, {} micro-batches", stages, m), stages, m, {}, {}};
        for (int r = 0; r < repeats; ++r) {
          c.tandem.push_back(tandem_loop(w, stages, m, "1f1b", 0, x, y));
          if (py) c.python.push_back(py->ask_number(fmt::format("pipe {} {}", stages, m)));
          probes.push_back(gemm_probe(cores));
        }
        sweep.push_back(std::move(c));
      }
    }
  }

  const Stats ceiling = summarize(probes);
  if (!baseline_only) {
    std::printf(
        "\nCeiling: %.1f GFLOP/s (%.1f-%.1f), the median of %zu samples of the better way "
        "(square 1024) taken between the runs below.\n",
        ceiling.median / 1e9, ceiling.min / 1e9, ceiling.max / 1e9, probes.size());
  }
  auto of_ceiling = [&](double sps) {
    return ceiling.median > 0
               ? fmt::format("{:.0f}%", 100 * sps * flops_per_sample / ceiling.median)
               : std::string("-");
  };
  const Stats b = summarize(plain), t1 = summarize(one), lay = summarize(layers);
  std::printf(
      "\n| run, %d threads | samples/s median | min-max | ratio to plain loop | GFLOP/s | of "
      "ceiling |\n|---|---|---|---|---|---|\n",
      cores);
  auto row = [&](const std::string& name, const Stats& s) {
    std::printf("| %s | %.0f | %.0f-%.0f | %.3f | %.1f | %s |\n", name.c_str(), s.median, s.min,
                s.max, s.median / b.median, s.median * flops_per_sample / 1e9,
                of_ceiling(s.median).c_str());
  };
  row("plain LibTorch loop (torch::nn modules), own thread", b);
  row("plain LibTorch loop (torch::nn modules), main thread", summarize(plain_main));
  row("plain loop over tandem's layers, own thread", lay);
  row("tandem 1 stage", t1);
  if (py) row("plain PyTorch loop (Python, bench/pipe_baseline.py)", summarize(py_plain));
  std::printf(
      "\nTarget, tandem 1 stage >= 0.97x the plain loop: %.3f (%s); against the loop over "
      "tandem's layers %.3f.\n",
      t1.median / b.median, t1.median >= 0.97 * b.median ? "met" : "not met",
      t1.median / lay.median);
  if (baseline_only) return 0;

  if (py) {
    std::printf("\nPartitions (layers per stage): ");
    for (int stages : {2, 4}) {
      std::printf(
          "%d stages: tandem %s, Pipe %s. ", stages,
          balance_text(tandem::graph::partition_by_parameters(make_model(w), stages).balance())
              .c_str(),
          py->ask(fmt::format("partition {}", stages)).c_str());
    }
    std::printf("\n");
  }
  std::printf(
      "\n| tandem 1f1b | samples/s median | min-max | ratio to plain loop | of ceiling "
      "| Pipe samples/s median | Pipe min-max | tandem / Pipe |\n"
      "|---|---|---|---|---|---|---|---|\n");
  int twice = 0, compared = 0;
  double best = std::max(b.median, t1.median), low = 0, high = 0;
  for (const auto& c : sweep) {
    const Stats s = summarize(c.tandem);
    best = std::max(best, s.median);
    std::printf("| %s | %.0f | %.0f-%.0f | %.3f | %s |", c.name.c_str(), s.median, s.min, s.max,
                s.median / b.median, of_ceiling(s.median).c_str());
    if (c.python.empty()) {
      std::printf(" - | - | - |\n");
      continue;
    }
    const Stats p = summarize(c.python);
    const double ratio = s.median / p.median;
    low = compared ? std::min(low, ratio) : ratio;
    high = std::max(high, ratio);
    ++compared;
    twice += ratio >= 2.0;
    std::printf(" %.0f | %.0f-%.0f | %.2f |\n", p.median, p.min, p.max, ratio);
  }
  if (compared > 0) {
    std::printf(
        "\nTarget, >= 2x Pipe at equal stages and micro-batches: met at %d of %d "
        "configurations (tandem / Pipe from %.2f to %.2f).\n",
        twice, compared, low, high);
  }
  std::printf(
      "\nTarget, the mlp at >= 50%% of the matrix-multiply ceiling: best configuration at %s "
      "(%s).\n",
      of_ceiling(best).c_str(),
      best * flops_per_sample >= 0.5 * ceiling.median ? "met" : "not met");

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
