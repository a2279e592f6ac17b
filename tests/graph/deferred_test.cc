#include "tandem/graph/deferred.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>

namespace tandem::graph {
namespace {

// A W action frees each piece of deferred work, and what it keeps, once it has run: the next
// piece runs without it.
TEST(DeferredWeightGrads, RunAllFreesEachWorkBeforeTheNext) {
  DeferredWeightGrads queue;
  auto first_kept = std::make_shared<int>(1);
  const std::weak_ptr<int> first = first_kept;
  int ran = 0;
  queue.push([kept = std::move(first_kept), &ran] { ran += *kept; });
  bool first_gone_then = false;
  queue.push([&] {
    first_gone_then = first.expired();
    ran += 10;
  });
  ASSERT_FALSE(first.expired());
  queue.run_all();
  EXPECT_EQ(ran, 11) << "both ran, in order";
  EXPECT_TRUE(first_gone_then);
  EXPECT_EQ(queue.size(), 0u);
}

// A deferred gradient adds to the one already there, in the parameter's type.
TEST(DeferredWeightGrads, AccumulatesIntoTheParametersGradient) {
  torch::Tensor p = torch::zeros({2, 3}).requires_grad_(true);
  accumulate_grad(p, torch::ones({2, 3}, torch::kBFloat16));
  accumulate_grad(p, torch::ones({2, 3}));
  EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  EXPECT_TRUE(p.grad().equal(torch::full({2, 3}, 2.0)));
  torch::Tensor whole = torch::zeros({2, 4}).requires_grad_(true);
  accumulate_grad(whole, torch::ones({2, 2}), /*dim=*/1, /*first=*/1);
  EXPECT_TRUE(whole.grad().equal(torch::tensor({{0., 1., 1., 0.}, {0., 1., 1., 0.}})));
}

}  // namespace
}  // namespace tandem::graph
