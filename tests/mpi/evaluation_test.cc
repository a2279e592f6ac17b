// Evaluations in a row across ranks, each compared with the same pipeline in process.
//
// A forward-only run does not advance the step, so before messages carried the pipeline's run
// number (transport::MessageKey::run) two evaluations in a row sent their activations under the
// same key. The sender runs ahead into the next evaluation as soon as its sends are queued;
// over TCP a large message goes by rendezvous and completes after a small one queued behind
// it, so the receiver took the second evaluation's tensor for the first (test accuracies of
// 0.59-0.68 against 0.84 over shared memory). Run under TCP only (mpi_tcp.cmake), with a large
// evaluation followed by a small one, repeatedly; each must score exactly what it scores in
// process (one replica: the same operations on the same values, bit for bit).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "mpi/mpi_transport.h"
#include "tandem/graph/partition.h"
#include "tandem/models/mlp.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::mpi {
Environment& test_environment();
}

namespace tandem {
namespace {

graph::Model wide_mlp() {
  torch::manual_seed(3);
  models::MlpOptions o;
  o.inputs = 256;
  o.width = 256;
  o.blocks = 1;
  o.dropout = 0.0;
  o.classes = 5;
  return models::mlp(o);
}

struct Batch {
  torch::Tensor input, target;
};

Batch batch_of(int64_t n, uint64_t seed) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randn({n, 256}, gen), torch::randint(5, {n}, gen)};
}

TEST(MpiEvaluation, EvaluationsInARowEachGetTheirOwnMessages) {
  auto& env = mpi::test_environment();
  const int ranks = env.size();
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(ranks), 1);
  o.microbatches = 2;
  // One thread per device on both sides, never more: the bits of a product depend on the
  // number of BLAS threads that compute it.
  o.lend_idle_cores = false;
  runtime::PipelineOptions mpi_options = o;
  mpi_options.transport = std::make_shared<mpi::MpiTransport>(env, mpi::Layout{ranks, 1},
                                                              mpi::MpiTransportOptions{60.0});
  graph::Model m = wide_mlp();
  auto part = graph::partition_by_parameters(m, ranks);
  runtime::Pipeline across(wide_mlp(), part, mpi_options);
  runtime::Pipeline here(wide_mlp(), part, o);
  // 1000 samples of 256 floats: 0.5 MiB per micro-batch message, by rendezvous over TCP;
  // then 4 samples, 2 KiB, sent eagerly.
  const std::vector<Batch> batches = {batch_of(1000, 1), batch_of(4, 2),   batch_of(1000, 3),
                                      batch_of(4, 4),    batch_of(998, 5), batch_of(6, 6)};
  for (int round = 0; round < 3; ++round) {
    for (size_t k = 0; k < batches.size(); ++k) {
      const Batch& b = batches[k];
      const runtime::StepStats want = here.evaluate(b.input, b.target);
      const runtime::StepStats got =
          across.evaluate(across.needs_input() ? b.input : torch::Tensor(),
                          across.needs_target() ? b.target : torch::Tensor(), b.input.size(0));
      if (!across.owns_loss()) continue;
      EXPECT_EQ(got.samples, want.samples) << "round " << round << ", batch " << k;
      EXPECT_EQ(got.metric_sum, want.metric_sum) << "round " << round << ", batch " << k;
      EXPECT_EQ(got.loss, want.loss) << "round " << round << ", batch " << k;
    }
    // And a training step right after the evaluations: it too gets its own messages.
    const Batch& t = batches[1];
    const runtime::StepStats want = here.forward_backward(t.input, t.target);
    const runtime::StepStats got =
        across.forward_backward(across.needs_input() ? t.input : torch::Tensor(),
                                across.needs_target() ? t.target : torch::Tensor(), 4);
    if (across.owns_loss()) {
      EXPECT_EQ(got.loss, want.loss) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace tandem
