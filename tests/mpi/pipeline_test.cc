// Pipelines across MPI ranks against the same model in process and on one device.
//
// With one replica each rank computes exactly what the in-process device of the same index
// computes, in the same order, so gradients must be bitwise equal to the in-process run. With
// replicas the weight gradients are sums over ranks of partial batches: equal to one device
// on the whole batch within the fp32 reordering tolerance of the in-process tests (1e-5 of
// the tensor's largest magnitude).
#include "tandem/runtime/pipeline.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../runtime/test_models.h"
#include "mpi/mpi_transport.h"

namespace tandem::mpi {
Environment& test_environment();
}

namespace tandem {
namespace {

struct Data {
  torch::Tensor input, target;
};

Data make_data(int64_t batch, int64_t features, int64_t classes, uint64_t seed) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randn({batch, features}, gen), torch::randint(classes, {batch}, gen)};
}

using Grads = std::map<std::string, torch::Tensor>;

Grads grads_of(const runtime::Pipeline& p) {
  Grads g;
  for (auto& [name, t] : p.named_parameters()) g[name] = t.grad().clone();
  return g;
}

struct Case {
  std::string schedule;
  int stages;
  int replicas;
  int microbatches;
  int batch;  // per replica
  bool skips;
  int virtual_stages = 1;  // interleaved: model chunks per rank
};

// Runs `c` under MPI (this rank's part) and in process (whole pipeline, one replica on the
// whole batch), returning both gradient sets for the parameters this rank owns.
void check_case(const Case& c) {
  auto& env = mpi::test_environment();
  ASSERT_EQ(env.size(), c.stages * c.replicas);
  // c.stages ranks per replica; interleaved and zb-v put several stages on each.
  const int chunks = c.schedule == "zb-v" ? 2 : c.virtual_stages;
  const int stages = c.stages * chunks;
  auto make = [&] {
    return c.skips ? testing::skip_model() : testing::small_mlp(0.0, 7, stages > 6 ? 2 : 1);
  };
  const int features = c.skips ? 6 : 12, classes = c.skips ? 3 : 5;
  auto part = [&](const graph::Model& m) {
    return c.skips ? graph::partition_by_balance(m, {1, 1, 1, 3})
                   : graph::partition_by_parameters(m, stages);
  };
  Data whole = make_data(static_cast<int64_t>(c.batch) * c.replicas, features, classes, 21);

  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(c.stages), 1);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  o.virtual_stages = c.virtual_stages;
  o.replicas = c.replicas;
  auto transport = std::make_shared<mpi::MpiTransport>(env, mpi::Layout{c.stages, c.replicas},
                                                       mpi::MpiTransportOptions{60.0});
  o.transport = transport;
  graph::Model m = make();
  runtime::Pipeline p(std::move(m), part(make()), o);
  const int replica = env.rank() / c.stages;
  // Each rank passes only what its stages read: the middle of a pipeline gets no data at all.
  auto step_on = [&](const Data& d) {
    return p.forward_backward(
        p.needs_input() ? d.input.narrow(0, replica * c.batch, c.batch) : torch::Tensor(),
        p.needs_target() ? d.target.narrow(0, replica * c.batch, c.batch) : torch::Tensor(),
        c.batch);
  };
  if (!c.skips && chunks == 1) {
    const int stage_device = env.rank() % c.stages;
    EXPECT_EQ(p.needs_input(), stage_device == 0);
    EXPECT_EQ(p.needs_target(), stage_device == c.stages - 1);
  }
  step_on(whole);
  Grads got = grads_of(p);

  // In process on this rank: the whole pipeline with one replica on the whole batch.
  runtime::PipelineOptions local = o;
  local.transport = nullptr;
  local.replicas = 1;
  graph::Model lm = make();
  runtime::Pipeline lp(std::move(lm), part(make()), local);
  lp.forward_backward(whole.input, whole.target);
  Grads want = grads_of(lp);
  auto expect_same_grads = [&](const Grads& got, const Grads& want, int step) {
    for (auto& [name, g] : got) {
      if (c.replicas == 1) {
        EXPECT_TRUE(torch::equal(g, want.at(name)))
            << name << " differs from the in-process run at step " << step;
      } else {
        const double scale = want.at(name).abs().max().item<double>();
        EXPECT_LE((g - want.at(name)).abs().max().item<double>(), 1e-5 * scale + 1e-7)
            << name << " at step " << step;
      }
    }
  };
  expect_same_grads(got, want, 0);
  // Three Adam steps keep the ranks' parameters equal to the in-process ones. Adam divides a
  // uniform gradient scale out of its steps, so each step's gradients are compared too.
  auto adam = [](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-2));
  };
  p.set_optimizer(adam);
  lp.set_optimizer(adam);
  for (int step = 1; step <= 3; ++step) {
    Data d = make_data(static_cast<int64_t>(c.batch) * c.replicas, features, classes, 49 + step);
    step_on(d);
    lp.forward_backward(d.input, d.target);
    expect_same_grads(grads_of(p), grads_of(lp), step);
    p.optimizer_step();
    lp.optimizer_step();
  }
  std::map<std::string, torch::Tensor> lparams;
  for (auto& [name, t] : lp.named_parameters()) lparams[name] = t;
  for (auto& [name, t] : p.named_parameters()) {
    const double diff = (t - lparams.at(name)).abs().max().item<double>();
    EXPECT_LE(diff, c.replicas == 1 ? 0.0 : 1e-5) << name << " after 3 Adam steps";
  }
}

std::vector<Case> cases_for(int world) {
  std::vector<Case> out;
  for (std::string s : {"sequential", "gpipe", "1f1b", "zb-h1"}) {
    if (s == "zb-h1" && world < 2) continue;
    out.push_back({s, world, 1, 4, 16, false});
    out.push_back({s, world, 1, 8, 50, false});  // uneven micro-batches
    if (world % 2 == 0 && world / 2 >= 1 && !(s == "zb-h1" && world / 2 < 2)) {
      out.push_back({s, world / 2, 2, 3, 12, false});  // data-parallel replicas
    }
    if (world == 4) out.push_back({s, 4, 1, 3, 12, true});  // skips to non-adjacent ranks
  }
  // Several stages per rank: interleaved (rank d holds stages d, d+p, ...) and zb-v (a V).
  out.push_back({"interleaved", world, 1, 2 * world, 8 * world, false, 2});
  out.push_back({"interleaved", world, 1, 2 * world, 8 * world + 3, false, 2});  // uneven
  out.push_back({"zb-v", world, 1, 2 * world, 8 * world, false});
  out.push_back({"zb-v", world, 1, 2 * world, 8 * world + 3, false});  // uneven
  if (world == 2) {
    // Skips between the chunks of two ranks: stages 0,1,0,1 (interleaved), 0,1,1,0 (zb-v).
    out.push_back({"interleaved", 2, 1, 4, 12, true, 2});
    out.push_back({"zb-v", 2, 1, 4, 12, true});
  }
  if (world == 4) out.push_back({"interleaved", 2, 2, 4, 12, false, 2});  // with replicas
  return out;
}

TEST(MpiPipeline, EquivalentToInProcessAndOneDevice) {
  for (const Case& c : cases_for(mpi::test_environment().size())) {
    SCOPED_TRACE(fmt::format(
        "{} ranks per replica={} virtual stages={} replicas={} "
        "microbatches={} batch={} skips={}",
        c.schedule, c.stages, c.virtual_stages, c.replicas, c.microbatches, c.batch, c.skips));
    check_case(c);
  }
}

}  // namespace
}  // namespace tandem
