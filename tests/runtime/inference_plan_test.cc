// The forward's plan (tandem predict) from given bytes: what a stage holds at each layer, and
// the halo planes a slab's neighbours may take late.
#include "tandem/runtime/inference_plan.h"

#include <gtest/gtest.h>

#include "tandem/graph/partition.h"
#include "tandem/models/layers.h"

namespace tandem {
namespace {

// A convolution that exchanges halos, a layer that exchanges none (a pooling), and a second
// convolution: input -> a -> b -> output. The layers' functions never run here.
graph::Model three_layers() {
  graph::Model m;
  m.layers.push_back(models::relu_layer("conv0", "input", "a"));
  m.layers.push_back(models::relu_layer("pool", "a", "b"));
  m.layers.push_back(models::relu_layer("conv1", "b", "output"));
  return m;
}

runtime::InferenceBytes bytes(uint64_t pool_held) {
  runtime::InferenceBytes b;
  b.tensors = {{"input", 100}, {"a", 50}, {"b", 20}, {"output", 20}};
  b.held = {80, pool_held, 40};
  b.parameters = {1, 0, 1};
  b.halo = {8, 0, 4};
  return b;
}

TEST(InferencePlan, ALayerWithoutAnExchangeAddsThePlanesSentAtTheLastOne) {
  const graph::Model m = three_layers();
  const graph::Partition whole = graph::partition_by_balance(m, {3});
  // The stage keeps its input throughout. conv0: 100 + 80 = 180. pool: 100 + 50 (a) + its 40,
  // plus conv0's 8 sent planes a neighbour may not have taken yet = 198. conv1: 100 + 20 + 40 =
  // 160. Parameters: 2.
  EXPECT_EQ(runtime::inference_peaks(m, bytes(40), whole), std::vector<double>{200});
}

TEST(InferencePlan, PlanesANeighbourSendsAheadAddNothing) {
  const graph::Model m = three_layers();
  const graph::Partition whole = graph::partition_by_balance(m, {3});
  // conv0's 180 is the most (pool: 100 + 50 + 10 + 8 = 168): a neighbour's planes for conv1,
  // sent before this slab receives them, are charged to that neighbour until then.
  EXPECT_EQ(runtime::inference_peaks(m, bytes(10), whole), std::vector<double>{182});
}

TEST(InferencePlan, EachStageFromItsOwnLayers) {
  const graph::Model m = three_layers();
  const graph::Partition split = graph::partition_by_balance(m, {2, 1});
  // Stage 0 receives the input, keeps it, sends b: conv0 100 + 80 = 180; pool 100 + 50 + 10 + 8
  // = 168; parameters 1. Stage 1 receives b: conv1 20 + 40 = 60, parameters 1.
  EXPECT_EQ(runtime::inference_peaks(m, bytes(10), split), (std::vector<double>{181, 61}));
}

}  // namespace
}  // namespace tandem
