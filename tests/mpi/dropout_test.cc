// Dropout across MPI ranks and replicas: every sample's mask is keyed by its place in the
// step's batch over all replicas, so any rank count, replica count and micro-batch count
// computes the gradients of one device on the whole batch in one micro-batch.
//
// Tolerance: 1e-5 of each gradient's largest magnitude, the in-process equivalence tests'
// fp32 bound. The masks are the same bits; only the products differ in rounding (a product
// over 3 or 8 rows rounds differently from the same rows in one over 24) and the micro-batches'
// and replicas' gradients are summed in another order. The control, other masks (another
// seed), moves the gradients by more than 1e-2 of their size.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../runtime/test_models.h"
#include "mpi/mpi_transport.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::mpi {
Environment& test_environment();
}

namespace tandem {
namespace {

using Grads = std::map<std::string, torch::Tensor>;

constexpr int64_t kBatch = 24;  // the step's batch over all replicas

struct Whole {
  torch::Tensor input, target;
};

Whole data() {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(31);
  return {torch::randn({kBatch, 12}, gen), torch::randint(5, {kBatch}, gen)};
}

// One device, the whole batch, one micro-batch.
Grads one_device(uint64_t seed) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("1", 1);
  o.microbatches = 1;
  o.seed = seed;
  graph::Model m = testing::small_mlp(0.5);
  auto part = graph::partition_by_parameters(m, 1);
  runtime::Pipeline p(std::move(m), part, o);
  Whole d = data();
  p.forward_backward(d.input, d.target);
  Grads g;
  for (auto& [name, t] : p.named_parameters()) g[name] = t.grad().clone();
  return g;
}

// This rank's gradients with `replicas` replicas of world / replicas stages.
Grads under_mpi(int replicas, int microbatches, const std::string& schedule) {
  auto& env = mpi::test_environment();
  const int stages = env.size() / replicas;
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(stages), 1);
  o.schedule = schedule;
  o.microbatches = microbatches;
  o.replicas = replicas;
  o.seed = 9;
  o.transport = std::make_shared<mpi::MpiTransport>(env, mpi::Layout{stages, replicas},
                                                    mpi::MpiTransportOptions{60.0});
  graph::Model m = testing::small_mlp(0.5);
  auto part = graph::partition_by_parameters(m, stages);
  runtime::Pipeline p(std::move(m), part, o);
  const int replica = env.rank() / stages;
  const int64_t per_replica = kBatch / replicas;
  Whole d = data();
  p.forward_backward(
      p.needs_input() ? d.input.narrow(0, replica * per_replica, per_replica) : torch::Tensor(),
      p.needs_target() ? d.target.narrow(0, replica * per_replica, per_replica) : torch::Tensor(),
      per_replica);
  Grads g;
  for (auto& [name, t] : p.named_parameters()) g[name] = t.grad().clone();
  return g;
}

double largest_relative_difference(const Grads& got, const Grads& want) {
  double worst = 0;
  for (auto& [name, g] : got) {
    const double scale = want.at(name).abs().max().item<double>();
    worst = std::max(worst, (g - want.at(name)).abs().max().item<double>() / scale);
  }
  return worst;
}

TEST(MpiDropout, AnySplitOfTheBatchDrawsTheMasksOfOneDevice) {
  const int world = mpi::test_environment().size();
  const Grads want = one_device(9);
  struct Split {
    int replicas, microbatches;
    std::string schedule;
  };
  std::vector<Split> splits = {{1, 1, "gpipe"}, {1, 3, "1f1b"}, {1, 8, "1f1b"}};
  if (world % 2 == 0) {
    splits.push_back({2, 1, "gpipe"});
    splits.push_back({2, 3, "1f1b"});
    if (world >= 4) splits.push_back({2, 4, "zb-h1"});
  }
  for (const Split& s : splits) {
    const Grads got = under_mpi(s.replicas, s.microbatches, s.schedule);
    ASSERT_FALSE(got.empty());
    EXPECT_LE(largest_relative_difference(got, want), 1e-5)
        << world << " ranks, " << s.replicas << " replicas, " << s.microbatches
        << " micro-batches (" << s.schedule << ")";
    EXPECT_GT(largest_relative_difference(got, one_device(10)), 1e-2) << "the masks do not matter";
  }
}

}  // namespace
}  // namespace tandem
