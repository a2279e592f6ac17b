// The conv3d-stack (4 convolutions of 16 filters on 32^3 volumes, batch 8 by default): a plain
// LibTorch loop over torch::nn::Conv3d modules, tandem on 1 stage, and tandem with 1F1B on 2
// stages against PyTorch's Pipe at the same micro-batch counts (bench/pipe_baseline.py --serve
// in a child process, timed in turn with tandem), with achieved FLOP/s against samples of the
// matrix-multiply ceiling taken between the runs.
//
// Shapes: input [B,1,S,S,S] -> output [B,1,S,S,S]; MSE against a random target of that shape.
// Usage: bench_conv3d [--repeats N] [--steps N] [--convs N] [--filters N] [--volume S]
//                     [--batch B] [--quick] [--python INTERPRETER [--pipe-script PATH]]
#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "python_baseline.h"
#include "tandem/common/device.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/runtime/pipeline.h"

namespace {

using namespace tandem::bench;

struct Workload {
  int convs = 4;
  int64_t filters = 16;
  int64_t volume = 32;
  int64_t batch = 8;
  int steps = 5;
};

tandem::graph::Model make_model(const Workload& w) {
  torch::manual_seed(0);
  tandem::models::Conv3dStackOptions o;
  o.convs = w.convs;
  o.filters = w.filters;
  o.volume = w.volume;
  return tandem::models::conv3d_stack(o);
}

// Samples per second of a plain LibTorch loop over torch::nn::Conv3d modules (3^3, "same"
// padding, relu after all but the last): forward, backward, Adam, on the calling thread.
double plain_loop(const Workload& w, int threads, const torch::Tensor& x, const torch::Tensor& y) {
  set_threads(threads);
  torch::manual_seed(0);
  torch::nn::Sequential net;
  for (int i = 0; i < w.convs; ++i) {
    const bool last = i == w.convs - 1;
    net->push_back(torch::nn::Conv3d(
        torch::nn::Conv3dOptions(i == 0 ? 1 : w.filters, last ? 1 : w.filters, 3).padding(1)));
    if (!last) net->push_back(torch::nn::ReLU());
  }
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-4));
  return samples_per_s(
      [&] {
        opt.zero_grad();
        torch::nn::functional::mse_loss(net->forward(x), y).backward();
        opt.step();
      },
      w.steps, w.batch);
}

double tandem_loop(const Workload& w, int stages, int microbatches, const std::string& schedule,
                   int threads, const torch::Tensor& x, const torch::Tensor& y) {
  return pipeline_samples_per_s(make_model(w), stages, microbatches, schedule, threads, x, y,
                                w.steps, w.batch);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::string python, pipe_script = "bench/pipe_baseline.py";
  Workload w;
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    auto next = [&] { return std::atoi(argv[++i]); };
    if (!std::strcmp(argv[i], "--repeats") && more) {
      repeats = next();
    } else if (!std::strcmp(argv[i], "--steps") && more) {
      w.steps = next();
    } else if (!std::strcmp(argv[i], "--convs") && more) {
      w.convs = next();
    } else if (!std::strcmp(argv[i], "--filters") && more) {
      w.filters = next();
    } else if (!std::strcmp(argv[i], "--volume") && more) {
      w.volume = next();
    } else if (!std::strcmp(argv[i], "--batch") && more) {
      w.batch = next();
    } else if (!std::strcmp(argv[i], "--python") && more) {
      python = argv[++i];
    } else if (!std::strcmp(argv[i], "--pipe-script") && more) {
      pipe_script = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      repeats = 3;
      w.steps = 2;
      w.volume = 16;
    } else {
      std::fprintf(stderr,
                   "usage: bench_conv3d [--repeats N] [--steps N] [--convs N] [--filters N] "
                   "[--volume S] [--batch B] [--quick] [--python INTERPRETER [--pipe-script "
                   "PATH]]\n");
      return 2;
    }
  }
  const int cores = tandem::available_cores();
  std::unique_ptr<PythonBaseline> py;
  if (!python.empty()) {
    py = std::make_unique<PythonBaseline>(std::vector<std::string>{
        python, pipe_script, "--serve", "--model", "conv3d-stack", "--convs",
        std::to_string(w.convs), "--filters", std::to_string(w.filters), "--volume",
        std::to_string(w.volume), "--batch", std::to_string(w.batch), "--steps",
        std::to_string(w.steps), "--threads", std::to_string(cores)});
  }
  torch::manual_seed(1);
  const int64_t s = w.volume;
  torch::Tensor x = torch::randn({w.batch, 1, s, s, s});
  torch::Tensor y = torch::randn({w.batch, 1, s, s, s});
  const double flops_per_sample = train_flops_per_sample(make_model(w));
  std::printf(
      "# bench_conv3d: conv3d-stack %d convs, %lld filters, %lld^3 volume, batch %lld, "
      "%d steps per run, %d runs, %d cores, OMP_WAIT_POLICY=%s; training FLOPs per sample (3x "
      "forward): %.1f M\n",
      w.convs, static_cast<long long>(w.filters), static_cast<long long>(s),
      static_cast<long long>(w.batch), w.steps, repeats, cores, omp_wait_policy().c_str(),
      flops_per_sample / 1e6);
  std::fflush(stdout);

  std::vector<int> microbatches;
  for (int m : {1, 2, 4, 8})
    if (m <= w.batch) microbatches.push_back(m);
  std::vector<double> plain, py_plain, one, probes;
  std::vector<std::vector<double>> two(microbatches.size()), pipe(microbatches.size());
  // In turn, so that load from elsewhere on the machine falls on every variant alike.
  for (int r = 0; r < repeats; ++r) {
    plain.push_back(on_own_thread([&] { return plain_loop(w, cores, x, y); }));
    if (py) py_plain.push_back(py->ask_number("plain"));
    one.push_back(tandem_loop(w, 1, 1, "sequential", cores, x, y));
    for (size_t i = 0; i < microbatches.size(); ++i) {
      two[i].push_back(tandem_loop(w, 2, microbatches[i], "1f1b", 0, x, y));
      if (py) pipe[i].push_back(py->ask_number(fmt::format("pipe 2 {}", microbatches[i])));
    }
    probes.push_back(gemm_probe(cores));
  }

  // Convolutions run through other kernels than GEMM, so the ceiling is a yardstick here, not
  // their bound.
  const Stats ceiling = summarize(probes);
  std::printf(
      "\nMatrix-multiply ceiling: %.1f GFLOP/s (%.1f-%.1f), the median of %zu samples (as in "
      "bench_core) taken between the runs below.",
      ceiling.median / 1e9, ceiling.min / 1e9, ceiling.max / 1e9, probes.size());
  if (py) {
    std::printf(
        " Partition (layers per stage): tandem %s, Pipe %s.",
        balance_text(tandem::graph::partition_by_parameters(make_model(w), 2).balance()).c_str(),
        py->ask("partition 2").c_str());
  }
  std::printf("\n");
  const Stats b = summarize(plain);
  std::printf(
      "\n| run | samples/s median | min-max | ratio to plain loop | GFLOP/s | of ceiling "
      "| Pipe samples/s median | Pipe min-max | tandem / Pipe |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  auto row = [&](const std::string& name, const std::vector<double>& runs,
                 const std::vector<double>& pipe_runs) {
    const Stats st = summarize(runs);
    std::printf("| %s | %.2f | %.2f-%.2f | %.3f | %.1f | %.0f%% |", name.c_str(), st.median, st.min,
                st.max, st.median / b.median, st.median * flops_per_sample / 1e9,
                100 * st.median * flops_per_sample / ceiling.median);
    if (pipe_runs.empty()) {
      std::printf(" - | - | - |\n");
      return;
    }
    const Stats p = summarize(pipe_runs);
    std::printf(" %.2f | %.2f-%.2f | %.2f |\n", p.median, p.min, p.max, st.median / p.median);
  };
  row(fmt::format("plain LibTorch loop (torch::nn modules), {} threads, own thread", cores), plain,
      {});
  if (py) row("plain PyTorch loop (Python, bench/pipe_baseline.py)", py_plain, {});
  row(fmt::format("tandem 1 stage, {} threads", cores), one, {});
  for (size_t i = 0; i < microbatches.size(); ++i) {
    row(fmt::format("tandem 1f1b 2 stages, {} micro-batches", microbatches[i]), two[i], pipe[i]);
  }
  return 0;
}
