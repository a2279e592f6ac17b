// A spatial split across MPI ranks (one slab per rank) against the same split in process and
// against one device on the full batch. The tolerance is the volume tests' (3e-5 of the
// gradient's largest magnitude, tests/spatial/spatial_equivalence_test.cc): the ranks sum the
// slabs' weight gradients with MPI_Allreduce, in process they are added in slab order, and the
// one-device reference sums over the whole volume at once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../models/volume_models.h"
#include "mpi/mpi_transport.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::mpi {
Environment& test_environment();
}

namespace tandem {
namespace {

using namespace model_testing;

constexpr double kRelTol = 3e-5;

struct Case {
  int stages;
  int slabs;
  int replicas;
  std::string schedule;
  int microbatches;
  bool recompute;
};

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const double scale = want.abs().max().item<double>();
  const double diff = (got.cpu() - want.cpu()).abs().max().item<double>();
  EXPECT_LE(diff, kRelTol * scale + 1e-7)
      << what << " differs by " << diff << " (scale " << scale << ")";
}

void check(const Case& c) {
  auto& env = mpi::test_environment();
  const int per_replica = c.stages * c.slabs;
  if (env.size() != per_replica * c.replicas) GTEST_SKIP() << "needs another rank count";
  const int64_t batch = 3;  // per replica: micro-batches of 2 and 1
  VolumeData whole = segmentation_data(batch * c.replicas, 16);
  auto make = [] { return small_unet(3, 0.0, /*bce=*/true); };
  auto part = [&](const graph::Model& m) {
    return c.stages == 1 ? graph::partition_by_balance(m, {15})
                         : graph::partition_by_balance(m, {8, 7});
  };
  auto want = reference_grads(make(), whole);

  runtime::PipelineOptions o;
  o.devices = cpu_devices(per_replica);
  o.slabs = c.slabs;
  o.slab_extent = 16;
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  o.recompute = c.recompute;
  o.replicas = c.replicas;
  o.transport = std::make_shared<mpi::MpiTransport>(
      env, mpi::Layout{per_replica, c.replicas, c.slabs}, mpi::MpiTransportOptions{60.0});
  graph::Model m = make();
  runtime::Pipeline p(std::move(m), part(make()), o);
  const int replica = env.rank() / per_replica;
  const torch::Tensor input = whole.input.narrow(0, replica * batch, batch);
  const torch::Tensor target = whole.target.narrow(0, replica * batch, batch);
  runtime::StepStats s = p.forward_backward(p.needs_input() ? input : torch::Tensor(),
                                            p.needs_target() ? target : torch::Tensor(), batch);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
  if (p.owns_loss() && c.replicas == 1) {
    graph::Model ref = make();
    const double want_loss =
        ref.loss(reference_forward(ref, whole.input), whole.target).item<double>();
    EXPECT_NEAR(s.loss, want_loss, 1e-6);
  }
  // The in-process split of the same layout: the same gradients within the tolerance.
  if (c.replicas == 1) {
    runtime::PipelineOptions io = o;
    io.transport = nullptr;
    graph::Model im = make();
    runtime::Pipeline inproc(std::move(im), part(make()), io);
    inproc.forward_backward(whole.input, whole.target);
    auto mine = p.named_parameters();
    auto theirs = inproc.named_parameters();
    for (size_t k = 0; k < mine.size(); ++k) {
      for (auto& [name, t] : theirs)
        if (name == mine[k].first) expect_close(mine[k].second.grad(), t.grad(), name);
    }
  }
  // The evaluation's Dice equals one device's on the first slab of the loss stage.
  runtime::StepStats e = p.evaluate(p.needs_input() ? input : torch::Tensor(),
                                    p.needs_target() ? target : torch::Tensor(), batch);
  if (p.owns_loss()) {
    graph::Model ref = make();
    torch::NoGradGuard no_grad;
    const double want_metric =
        ref.metric(reference_forward(ref, input, 0, 0, 0, /*training=*/false), target);
    EXPECT_NEAR(e.metric_sum, want_metric, 1e-9);
    EXPECT_EQ(e.samples, batch);
  } else {
    EXPECT_EQ(e.samples, 0) << "only the first slab of the loss stage reports";
  }
}

TEST(MpiSpatial, TwoSlabs) { check({1, 2, 1, "1f1b", 2, false}); }
TEST(MpiSpatial, TwoSlabsRecomputeZeroBubble) { check({1, 2, 1, "zb-h1", 2, true}); }
TEST(MpiSpatial, FourSlabs) { check({1, 4, 1, "gpipe", 2, false}); }
TEST(MpiSpatial, TwoStagesOfTwoSlabs) { check({2, 2, 1, "1f1b", 2, false}); }
TEST(MpiSpatial, TwoSlabsTwoReplicas) { check({1, 2, 2, "1f1b", 2, false}); }

}  // namespace
}  // namespace tandem
