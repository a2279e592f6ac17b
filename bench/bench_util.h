// Pieces the benchmark programs share: run statistics, timing a training loop on a thread of
// its own, the BLAS in use, the matrix-multiply ceiling.
#pragma once

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::bench {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median = 0, min = 0, max = 0;
};

inline Stats summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Samples per second of `step` (one training step of `batch` samples): one warm-up step, then
// `steps` timed steps.
template <typename Step>
double samples_per_s(Step&& step, int steps, int64_t batch) {
  step();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) step();
  return static_cast<double>(steps * batch) / seconds_since(t0);
}

// Samples per second of `model` trained by tandem: `stages` CPU devices of `threads` each,
// split by parameters, Adam, `steps` timed steps after a warm-up.
inline double pipeline_samples_per_s(graph::Model model, int stages, int microbatches,
                                     const std::string& schedule, int threads,
                                     const torch::Tensor& x, const torch::Tensor& y, int steps,
                                     int64_t batch) {
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(stages), threads);
  o.schedule = schedule;
  o.microbatches = microbatches;
  auto part = graph::partition_by_parameters(model, stages);
  runtime::Pipeline p(std::move(model), part, o);
  p.set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-4));
  });
  return samples_per_s(
      [&] {
        p.forward_backward(x, y);
        p.optimizer_step();
      },
      steps, batch);
}

// Runs `f` on a new thread and returns its result. A training loop timed this way has what a
// tandem device worker has: a thread of its own, so its own OpenMP team and its own malloc
// arena. On the main thread glibc's main arena returns freed memory to the kernel at the end
// of each step (heap trimming) and the next step faults it back in, page by page.
template <typename F>
auto on_own_thread(F&& f) -> decltype(f()) {
  decltype(f()) result{};
  std::exception_ptr error;
  std::thread t([&] {
    try {
      result = f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
  return result;
}

// Sets the intra-op budget of the calling thread (OpenMP) and of the process-wide OpenBLAS
// pool, as tandem does for a device worker.
inline void set_threads(int threads) {
  at::set_num_threads(threads);
  tandem::set_blas_threads(threads);
}

// Forward FLOPs per sample of the layers that report them (linear, conv3d); a training step
// costs three times that: forward, input gradient, weight gradient.
inline double train_flops_per_sample(const graph::Model& m) {
  double f = 0;
  for (const auto& l : m.layers) f += l.forward_flops_per_sample;
  return 3.0 * f;
}

// "OpenBLAS 0.3.21 ... (Cooperlake)" from the loaded BLAS, or "" when it is not OpenBLAS.
inline std::string blas_description() {
  using GetString = char* (*)();
  auto config = reinterpret_cast<GetString>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  auto core = reinterpret_cast<GetString>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!config) return "";
  std::string s = config();
  if (core) s += std::string(", core ") + core();
  return s;
}

// How idle OpenMP threads wait (see bench/RESULTS.md): the environment's OMP_WAIT_POLICY.
inline std::string omp_wait_policy() {
  const char* p = std::getenv("OMP_WAIT_POLICY");
  return p ? p : "unset";
}

// One float32 GEMM shape: C[m,n] = A[m,k] B[k,n], B given transposed when `b_transposed`
// (as a linear layer's forward multiplies by the weight's transpose).
struct GemmShape {
  std::string name;
  int64_t m, k, n;
  bool b_transposed = false;
};

// FLOP/s of one GEMM shape with `workers` threads at once, each repeating its own product for
// at least `min_seconds` with `blas_threads` BLAS threads (process-wide, so the same for all):
// the median of `repeats` samples of the total rate. One worker with all the cores as BLAS
// threads is how the plain loop multiplies; one worker per core with one BLAS thread each is
// how tandem's stages do.
inline Stats gemm_flops_per_s(const GemmShape& g, int workers, int blas_threads, int repeats,
                              double min_seconds = 0.2) {
  tandem::set_blas_threads(blas_threads);
  torch::manual_seed(0);
  std::vector<torch::Tensor> a, b, c;
  for (int t = 0; t < workers; ++t) {
    a.push_back(torch::randn({g.m, g.k}));
    b.push_back(g.b_transposed ? torch::randn({g.n, g.k}).t() : torch::randn({g.k, g.n}));
    c.push_back(torch::empty({g.m, g.n}));
  }
  const double flops = 2.0 * static_cast<double>(g.m * g.k * g.n);
  std::vector<double> v;
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
    std::vector<int64_t> calls(workers, 0);
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (int t = 0; t < workers; ++t) {
      threads.emplace_back([&, t] {
        at::set_num_threads(1);
        do {
          torch::mm_out(c[t], a[t], b[t]);
          ++calls[t];
        } while (seconds_since(t0) < min_seconds);
      });
    }
    for (auto& t : threads) t.join();
    const double s = seconds_since(t0);
    int64_t total = 0;
    for (int64_t n : calls) total += n;
    if (r >= 0) v.push_back(flops * static_cast<double>(total) / s);
  }
  return summarize(v);
}

// One short sample of the matrix-multiply ceiling, cheap enough to take between the runs it
// is compared with: float32 1024x1024 by 1024x1024, the better of one product with all `cores`
// as BLAS threads and `cores` products at once with one BLAS thread each.
inline double gemm_probe(int cores) {
  const GemmShape square{"square 1024", 1024, 1024, 1024};
  return std::max(gemm_flops_per_s(square, 1, cores, 1, 0.1).median,
                  gemm_flops_per_s(square, cores, 1, 1, 0.1).median);
}

// The balance ("10,10": layers per stage) of a partition.
inline std::string balance_text(const std::vector<int>& balance) {
  std::string s;
  for (int b : balance) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

}  // namespace tandem::bench
