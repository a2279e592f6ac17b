// Conv3d layers split their backward: under zb-h1 the input gradient is computed in I and the
// weight gradients in W, and the result equals the one-device gradients (tolerance as in the
// volume equivalence tests: 3e-5 of the largest magnitude, reordered fp32 sums over voxels).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/models/conv3d_stack.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/schedule/action.h"

namespace tandem {
namespace {

graph::Model stack() {
  torch::manual_seed(5);
  models::Conv3dStackOptions o;
  o.convs = 4;
  o.filters = 4;
  return models::conv3d_stack(o);
}

TEST(SplitConv, ZeroBubbleGradientsEqualOneDevice) {
  torch::Tensor x = torch::randn({6, 1, 8, 8, 8}), y = torch::randn({6, 1, 8, 8, 8});
  graph::Model ref = stack();
  torch::Tensor h = x;
  for (auto& l : ref.layers) h = l.forward({h})[0];
  ref.loss(h, y).backward();
  std::map<std::string, torch::Tensor> want;
  for (auto& l : ref.layers)
    for (auto& p : graph::named_parameters(l)) want[p.first] = p.second.grad();

  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.schedule = "zb-h1";
  o.microbatches = 3;
  graph::Model m = stack();
  auto part = graph::partition_by_balance(m, {2, 2});
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(x, y);
  int weight_actions = 0;
  for (const auto& t : p.last_timings()) weight_actions += t.action.op == schedule::Op::kWeight;
  EXPECT_EQ(weight_actions, 2 * 3);
  EXPECT_NE(p.placement_table().find("yes"), std::string::npos) << p.placement_table();
  for (auto& [name, t] : p.named_parameters()) {
    const double scale = want.at(name).abs().max().item<double>();
    EXPECT_LE((t.grad() - want.at(name)).abs().max().item<double>(), 3e-5 * scale + 1e-7) << name;
  }
}

}  // namespace
}  // namespace tandem
