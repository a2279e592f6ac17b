// Pieces the benchmark programs share: run statistics, timing a training loop on a thread of
// its own, the BLAS in use, the matrix-multiply ceiling, and reading the key=value result
// lines of bench/pipe_baseline.py.
#pragma once

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/graph/model.h"

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

// FLOP/s of one GEMM shape on the calling thread with `threads` BLAS threads: each sample
// repeats the product for at least `min_seconds`; the median of `repeats` samples.
inline Stats gemm_flops_per_s(const GemmShape& g, int threads, int repeats,
                              double min_seconds = 0.2) {
  set_threads(threads);
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({g.m, g.k});
  torch::Tensor b = g.b_transposed ? torch::randn({g.n, g.k}).t() : torch::randn({g.k, g.n});
  torch::Tensor c = torch::empty({g.m, g.n});
  torch::mm_out(c, a, b);  // warm-up
  const double flops = 2.0 * static_cast<double>(g.m * g.k * g.n);
  std::vector<double> v;
  for (int r = 0; r < repeats; ++r) {
    int64_t calls = 0;
    const auto t0 = Clock::now();
    double s = 0;
    do {
      torch::mm_out(c, a, b);
      ++calls;
      s = seconds_since(t0);
    } while (s < min_seconds);
    v.push_back(flops * static_cast<double>(calls) / s);
  }
  return summarize(v);
}

// Results of bench/pipe_baseline.py: lines "KIND key=value ...". Keyed by
// "KIND model=M stages=S microbatches=N".
class BaselineLines {
 public:
  // Reads `path`; an empty path gives no lines. Throws when a named file cannot be read.
  explicit BaselineLines(const std::string& path) {
    if (path.empty()) return;
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read baseline results " + path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string kind, word;
      words >> kind;
      std::map<std::string, std::string> kv;
      while (words >> word) {
        const auto eq = word.find('=');
        if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
      }
      if (!kv.count("samples_per_s")) continue;
      Stats s{std::stod(kv["samples_per_s"]), std::stod(kv["min"]), std::stod(kv["max"])};
      results_[key(kind, kv["model"], std::stoi(kv["stages"]), std::stoi(kv["microbatches"]))] = s;
    }
  }

  // The result for one configuration, or null when the file has none.
  const Stats* find(const std::string& kind, const std::string& model, int stages,
                    int microbatches) const {
    auto it = results_.find(key(kind, model, stages, microbatches));
    return it == results_.end() ? nullptr : &it->second;
  }

 private:
  static std::string key(const std::string& kind, const std::string& model, int stages,
                         int microbatches) {
    return kind + " " + model + " " + std::to_string(stages) + " " + std::to_string(microbatches);
  }
  std::map<std::string, Stats> results_;
};

}  // namespace tandem::bench
