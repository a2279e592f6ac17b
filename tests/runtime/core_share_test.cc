// CoreShare: the BLAS pool's size as devices begin and end, and what lending does to a
// pipeline's results: within fp32 rounding of fixed shares, bitwise where no BLAS product runs.
#include "runtime/core_share.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/runtime/pipeline.h"
#include "test_models.h"

namespace tandem {
namespace {

TEST(CoreShare, DividesThePoolAmongTheDevicesComputing) {
  CoreShare share({1, 1, 1, 1}, 4);
  EXPECT_EQ(share.threads_for(1), 4);
  EXPECT_EQ(share.threads_for(2), 2);
  EXPECT_EQ(share.threads_for(3), 1);  // 4 / 3, rounded down
  EXPECT_EQ(share.threads_for(4), 1);
  CoreShare wide({4, 4}, 4);  // never below the smallest share
  EXPECT_EQ(wide.threads_for(2), 4);
}

TEST(CoreShare, RejectsPoolsSmallerThanAShareAndEmptyShares) {
  EXPECT_THROW(CoreShare({2, 3}, 2), Error);
  EXPECT_THROW(CoreShare({0, 0}, 2), Error);
  EXPECT_THROW(CoreShare({-1, 1}, 2), Error);
}

TEST(CoreShare, BlasPoolGrowsOnlyWhenADeviceBegins) {
  const int before = blas_threads();
  {
    CoreShare share({1, 1, 0}, 2);  // device 2 is outside the share
    EXPECT_EQ(share.begin(0), 2);
    EXPECT_EQ(share.blas_threads_set(), 2);
    if (before > 0) {
      EXPECT_EQ(blas_threads(), 2);
    }
    EXPECT_EQ(share.begin(1), 1);
    EXPECT_EQ(share.computing(), 2);
    if (before > 0) {
      EXPECT_EQ(blas_threads(), 1);
    }
    share.end(1);
    EXPECT_EQ(share.blas_threads_set(), 1);  // device 0 keeps 1 until a device begins
    share.end(0);
    EXPECT_EQ(share.computing(), 0);
    EXPECT_EQ(share.begin(1), 2);
    share.end(1);
  }
  if (before > 0) set_blas_threads(before);
}

TEST(CoreShare, BusyMarksItsLifetimeFromManyThreads) {
  CoreShare share({1, 1, 1, 1}, 4);
  std::vector<std::thread> workers;
  for (int d = 0; d < 4; ++d) {
    workers.emplace_back([&share, d] {
      for (int i = 0; i < 200; ++i) {
        CoreShare::Busy busy(&share, d);
        EXPECT_GE(share.computing(), 1);
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(share.computing(), 0);
  EXPECT_GE(share.blas_threads_set(), 1);
  EXPECT_LE(share.blas_threads_set(), 4);
}

// The gradients of a 2-device pipeline with and without lending; shapes large enough that
// BLAS splits the products among threads.
std::map<std::string, torch::Tensor> pipeline_grads(graph::Model m, torch::Tensor x,
                                                    torch::Tensor y, bool lend) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.microbatches = 2;
  o.lend_idle_cores = lend;
  graph::Partition part = graph::partition_by_parameters(m, 2);
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(x, y);
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : p.named_parameters()) out[name] = t.grad().clone();
  return out;
}

void expect_bitwise_equal(const std::map<std::string, torch::Tensor>& a,
                          const std::map<std::string, torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (auto& [name, g] : a) EXPECT_TRUE(torch::equal(g, b.at(name))) << name;
}

// Lending changes how many BLAS threads compute a product, and with OpenBLAS's Haswell and Zen
// kernels that changes the last bits of most products (SkylakeX and Cooperlake kernels: of
// some shapes; bench/RESULTS.md, "BLAS"). That is why lending is opt-in: its results are not
// bitwise those of fixed shares, nor of another run. They differ only by fp32 rounding, though:
// a product over K = 512 summed in other blocks moves by about sqrt(K) * 2^-24 ~ 1.4e-6 of the
// sum of its terms' magnitudes, and 3 layers forward and back each add such a step. 1e-5 of
// each gradient's largest value bounds that (measured here: 3-5e-7 with Haswell kernels, 0
// with SkylakeX ones), while a gradient computed wrongly under lending (a lost micro-batch:
// half of it) would be far outside.
TEST(CoreShare, MlpGradientsWithLendingAgreeWithinFloatRounding) {
  if (available_cores() < 2) GTEST_SKIP() << "one core: nothing to lend";
  auto make = [] {
    torch::manual_seed(3);
    models::MlpOptions mo;
    mo.inputs = 512;
    mo.width = 512;
    mo.blocks = 2;
    mo.classes = 10;
    return models::mlp(mo);
  };
  torch::manual_seed(4);
  torch::Tensor x = torch::randn({256, 512});
  torch::Tensor y = torch::randint(0, 10, {256});
  auto keep = pipeline_grads(make(), x, y, false);
  auto lend = pipeline_grads(make(), x, y, true);
  ASSERT_EQ(keep.size(), lend.size());
  for (auto& [name, g] : keep) {
    const double scale = g.abs().max().item<double>();
    const double diff = (lend.at(name) - g).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5 * scale) << name << " (scale " << scale << ")";
  }
  // Keeping the shares, the default, is bitwise the same from one run to the next.
  expect_bitwise_equal(keep, pipeline_grads(make(), x, y, false));
}

// The conv3d-stack's layers multiply with no BLAS product: LibTorch convolves through oneDNN
// on the device's own ATen threads, which lending never changes (only the BLAS pool is lent).
// So its gradients are bitwise equal with and without lending on every BLAS kernel.
TEST(CoreShare, Conv3dGradientsAreBitwiseEqualWithAndWithoutLending) {
  if (available_cores() < 2) GTEST_SKIP() << "one core: nothing to lend";
  auto make = [] {
    torch::manual_seed(5);
    models::Conv3dStackOptions co;
    co.convs = 4;
    co.filters = 8;
    co.volume = 16;
    return models::conv3d_stack(co);
  };
  torch::manual_seed(6);
  torch::Tensor x = torch::randn({4, 1, 16, 16, 16});
  torch::Tensor y = (torch::rand({4, 1, 16, 16, 16}) > 0.5).to(torch::kFloat);
  expect_bitwise_equal(pipeline_grads(make(), x, y, false), pipeline_grads(make(), x, y, true));
}

}  // namespace
}  // namespace tandem
