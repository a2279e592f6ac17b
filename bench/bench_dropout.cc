// What a dropout mask keyed by sample costs (include/tandem/models/keyed_dropout.h: Philox
// 4x32-10 per element) against the mask LibTorch draws from its CPU generator (bernoulli_, the
// way tandem drew masks before, keyed per micro-batch), for the tensors the built-in models
// drop: the mlp's last hidden layer and the 3D U-Net's bottom level (256 channels at S/8 per
// side with 4 levels and 32 filters), and, for scale, the forward of the convolution that
// produces the U-Net's bottom tensor. Medians of `--repeats` runs of `--iters` calls each.
//
// Usage: bench_dropout [--threads 1,2] [--repeats 5] [--iters 5]
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tandem/models/keyed_dropout.h"

namespace tandem::bench {
namespace {

template <typename F>
double ms_per_call(F&& f, int iters) {
  f();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  return 1e3 * seconds_since(t0) / iters;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string what;
  std::vector<int64_t> sizes;
  int64_t conv_channels = 0;  // > 0: also time the 3x3x3 convolution producing the tensor
};

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem::bench;
  CLI::App app{"keyed dropout masks against LibTorch's bernoulli_"};
  std::vector<int> threads = {1, 2};
  int repeats = 5, iters = 5;
  app.add_option("--threads", threads, "intra-op thread counts")->delimiter(',');
  app.add_option("--repeats", repeats, "runs per row");
  app.add_option("--iters", iters, "calls per run");
  CLI11_PARSE(app, argc, argv);

  const std::vector<Case> cases = {
      {"mlp dropout, 1 micro-batch of 8 (width 128)", {8, 128}},
      {"mlp dropout, batch 256, width 1024", {256, 1024}},
      {"unet3d bottom, 32^3 volume, batch 8", {8, 256, 4, 4, 4}, 256},
      {"unet3d bottom, 128^3 volume, 1 sample", {1, 256, 16, 16, 16}, 256},
  };
  std::printf("| tensor | elements | threads | keyed mask ms | bernoulli_ mask ms | keyed / bernoulli | ns per element | conv producing it, ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    int64_t numel = 1;
    for (int64_t s : c.sizes) numel *= s;
    for (int t : threads) {
      at::set_num_threads(t);
      std::vector<double> keyed, bern, conv;
      torch::Tensor x, w;
      if (c.conv_channels > 0) {
        x = torch::randn(c.sizes);
        w = torch::randn({c.conv_channels, c.sizes[1], 3, 3, 3});
      }
      for (int r = 0; r < repeats; ++r) {
        keyed.push_back(ms_per_call(
            [&] { tandem::models::keyed_dropout_mask(0x5eed, 40, c.sizes, 0.7); }, iters));
        auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
        bern.push_back(ms_per_call(
            [&] { torch::empty(c.sizes).bernoulli_(0.7, gen).div_(0.7); }, iters));
        if (c.conv_channels > 0) {
          torch::NoGradGuard no_grad;
          conv.push_back(ms_per_call([&] { torch::conv3d(x, w, {}, 1, 1); }, 1));
        }
      }
      const double k = median_of(keyed), b = median_of(bern);
      std::printf("| %s | %ld | %d | %.3f | %.3f | %.2f | %.2f | %s |\n", c.what.c_str(),
                  static_cast<long>(numel), t, k, b, k / b, 1e6 * k / numel,
                  conv.empty() ? "-" : fmt::format("{:.1f}", median_of(conv)).c_str());
    }
  }
  return 0;
}
