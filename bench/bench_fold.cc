// One single-sample 3D convolution on the CPU, forward and backward (input gradient, except for
// a model's first layer, weight and bias gradients): LibTorch's own path (torch::conv3d) against
// tandem's split_conv3d, which runs the sample as two depth slabs when DepthFold takes it
// (include/tandem/models/depth_fold.h). The shapes are the convolutions of the unet3d (3 levels, 8
// filters, 32^3) and of the conv3d-stack (16 filters, 32^3) that bench/RESULTS.md times as whole
// models.
//
// Timing: for each shape and thread count, the two ways in turn, `--repeats` times; each run
// takes one warm-up call, then times `--iters` calls. Medians and min-max of the per-call mean.
//
// Usage: bench_fold [--threads 1,2] [--repeats 5] [--iters 5]
#include <fmt/format.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tandem/models/depth_fold.h"
#include "tandem/models/split_conv.h"

namespace tandem::bench {
namespace {

struct Shape {
  const char* where;
  int64_t in, out, side;
  bool input_grad = true;  // false for a model's first layer: its input needs no gradient
};

// Milliseconds per call of `f` (forward and backward of one convolution).
template <typename F>
double ms_per_call(F&& f, int iters) {
  f();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  return 1e3 * seconds_since(t0) / iters;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::bench;
  std::vector<int> threads{1, 2};
  int repeats = 5, iters = 5;
  CLI::App app{
      "A single-sample Conv3d (3x3x3, padding 1) on the CPU, forward and backward: "
      "LibTorch's path against tandem's depth slabs."};
  app.add_option("--threads", threads, "intra-op thread counts")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--repeats", repeats, "runs of each way, in turn")->capture_default_str();
  app.add_option("--iters", iters, "timed calls per run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<Shape> shapes = {
      {"unet3d enc0.conv0", 1, 8, 32, false}, {"unet3d enc0.conv1", 8, 8, 32},
      {"unet3d dec0.conv0", 16, 8, 32},       {"unet3d enc1.conv0", 8, 16, 16},
      {"unet3d enc1.conv1", 16, 16, 16},      {"unet3d dec1.conv0", 32, 16, 16},
      {"unet3d bottom.conv0", 16, 32, 8},     {"unet3d bottom.conv1", 32, 32, 8},
      {"conv3d-stack conv1", 16, 16, 32},
  };
  std::printf(
      "# bench_fold: single-sample Conv3d 3x3x3, padding 1, forward + backward, %d runs "
      "of %d calls, OMP_WAIT_POLICY=%s\n\n",
      repeats, iters, omp_wait_policy().c_str());
  std::printf(
      "| convolution | in -> out filters, volume | threads | LibTorch ms median | min-max "
      "| depth slabs ms median | min-max | LibTorch / slabs |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  torch::manual_seed(0);
  for (int t : threads) {
    set_threads(t);
    for (const Shape& s : shapes) {
      torch::Tensor x =
          torch::randn({1, s.in, s.side, s.side, s.side}).requires_grad_(s.input_grad);
      torch::Tensor w = torch::randn({s.out, s.in, 3, 3, 3}).requires_grad_(true);
      torch::Tensor b = torch::randn({s.out}).requires_grad_(true);
      const bool folds = models::DepthFold::of(x, w, 1).has_value();
      auto whole = [&] { torch::conv3d(x, w, b, {1, 1, 1}, {1, 1, 1}).sum().backward(); };
      auto slabs = [&] { models::split_conv3d(x, w, b, 1).sum().backward(); };
      std::vector<double> a, c;
      for (int r = 0; r < repeats; ++r) {
        a.push_back(ms_per_call(whole, iters));
        c.push_back(ms_per_call(slabs, iters));
      }
      const Stats sa = summarize(a), sc = summarize(c);
      std::printf("| %s | %lld -> %lld, %lld^3 | %d | %.2f | %.2f-%.2f | %s | %.2f-%.2f | %.2f |\n",
                  s.where, static_cast<long long>(s.in), static_cast<long long>(s.out),
                  static_cast<long long>(s.side), t, sa.median, sa.min, sa.max,
                  folds ? fmt::format("{:.2f}", sc.median).c_str() : "not folded", sc.min, sc.max,
                  sa.median / sc.median);
    }
  }
  return 0;
}
