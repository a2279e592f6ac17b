#include "tandem/models/relu.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

struct ReluRun {
  torch::Tensor y, x_grad, other_grad, held, c;
  const void* y_grad_memory = nullptr;
  const void* z_grad_memory = nullptr;
};

// (relu(x * 2) + other) * c, summed: the gradient reaching the relu comes from an addition that
// hands the same tensor to `other` too, unless `alone`, where the addition is left out. `hold`:
// a hook on the relu's result keeps the gradient it sees.
ReluRun run(bool in_place_kind, bool alone, c10::ScalarType type, bool hold = false) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 3, 4, 5}).to(type).requires_grad_();
  const torch::Tensor other = torch::randn({2, 3, 4, 5}).to(type).requires_grad_();
  const torch::Tensor c = torch::randn({2, 3, 4, 5}).to(type);
  ReluRun r;
  torch::Tensor z = x * 2;
  z.register_hook([&r](const torch::Tensor& g) { r.z_grad_memory = g.data_ptr(); });
  r.y = in_place_kind ? models::relu_in_place_with_gradient_in_place(z) : torch::relu_(z);
  r.y.register_hook([&r, hold](const torch::Tensor& g) {
    r.y_grad_memory = g.data_ptr();
    if (hold) r.held = g;
  });
  r.c = c;
  ((alone ? r.y : r.y + other) * c).sum().backward();
  r.x_grad = x.grad();
  if (!alone) r.other_grad = other.grad();
  return r;
}

TEST(ReluInPlace, HasLibTorchsValuesAndGradientsBitForBit) {
  for (c10::ScalarType type : {torch::kFloat32, torch::kBFloat16}) {
    for (bool alone : {true, false}) {
      const ReluRun mine = run(true, alone, type), theirs = run(false, alone, type);
      EXPECT_TRUE(torch::equal(mine.y, theirs.y)) << c10::toString(type) << " alone " << alone;
      EXPECT_TRUE(torch::equal(mine.x_grad, theirs.x_grad))
          << c10::toString(type) << " alone " << alone;
      if (!alone)
        EXPECT_TRUE(torch::equal(mine.other_grad, theirs.other_grad))
            << "the gradient the addition also handed to `other` was overwritten ("
            << c10::toString(type) << ")";
    }
  }
}

TEST(ReluInPlace, OverwritesTheIncomingGradientOnlyWhereNothingElseHoldsIt) {
  const ReluRun alone = run(true, true, torch::kFloat32);
  EXPECT_EQ(alone.z_grad_memory, alone.y_grad_memory) << "a gradient held by nothing else";
  const ReluRun held = run(true, true, torch::kFloat32, /*hold=*/true);
  EXPECT_NE(held.z_grad_memory, held.y_grad_memory) << "a gradient a hook keeps";
  EXPECT_TRUE(torch::equal(held.held, held.c)) << "the kept gradient was overwritten";
  const ReluRun libtorch = run(false, true, torch::kFloat32);
  EXPECT_NE(libtorch.z_grad_memory, libtorch.y_grad_memory) << "LibTorch's relu_ makes a new one";
}

TEST(ReluInPlace, LeavesASeedGradientAsItWas) {
  const torch::Tensor x = torch::randn({4, 6}).requires_grad_();
  const torch::Tensor y = models::relu_in_place_with_gradient_in_place(x * 1);
  const torch::Tensor seed = torch::randn({4, 6});
  const torch::Tensor before = seed.clone();
  y.backward(seed);
  EXPECT_TRUE(torch::equal(seed, before));
  EXPECT_TRUE(torch::equal(x.grad(), seed * (x > 0)));
}

TEST(ReluInPlace, WithoutAGraphIsRelu) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({5});
  EXPECT_TRUE(torch::equal(models::relu_in_place_with_gradient_in_place(x.clone()), x.relu()));
}

}  // namespace
}  // namespace tandem
