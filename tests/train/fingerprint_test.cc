// weights_fingerprint: the value of its definition (fingerprint.h), whatever order the
// parameters come in; a repeated name (a replica's or slab's copy) counts once; any bit of any
// parameter, a shape or a name changes it.
#include "tandem/train/fingerprint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tandem::train {
namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

Named three() {
  return {{"b.w", torch::tensor({1.0f, 2.0f})},
          {"c.m", torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2})},
          {"a.bias", torch::tensor(0.5f)}};
}

TEST(WeightsFingerprint, IsTheDefinitionsValue) {
  // Computed with Python's crcmod (crc-32c) over the lines
  //   "a.bias - 26973e52\nb.w 2 28c0c9b1\nc.m 2x2 9eba690a\n"
  // each line's CRC that of the tensor's little-endian float32 bytes.
  EXPECT_EQ(weights_fingerprint(three()), "44a37492");
}

TEST(WeightsFingerprint, DoesNotDependOnTheOrderOrOnCopies) {
  const Named all = three();
  Named reversed(all.rbegin(), all.rend());
  Named reordered = three();
  std::swap(reordered[0], reordered[2]);
  Named copied = three();
  copied.push_back({"b.w", torch::tensor({1.0f, 2.0f})});  // another replica's same weights
  EXPECT_EQ(weights_fingerprint(reversed), "44a37492");
  EXPECT_EQ(weights_fingerprint(reordered), "44a37492");
  EXPECT_EQ(weights_fingerprint(copied), "44a37492");
  // A view that is not contiguous hashes its values in order, as a state dict's copy would.
  Named transposed = three();
  transposed[1].second = torch::tensor({1.0f, 3.0f, 2.0f, 4.0f}).reshape({2, 2}).t();
  EXPECT_EQ(weights_fingerprint(transposed), "44a37492");
}

TEST(WeightsFingerprint, ChangesWithOneBitAShapeOrAName) {
  Named bit = three();
  bit[0].second = bit[0].second.clone();
  bit[0].second.view(torch::kInt32)[1].bitwise_xor_(1);  // 2.0f's neighbour: the last bit
  Named shape = three();
  shape[1].second = shape[1].second.reshape({4});
  Named name = three();
  name[2].first = "a.weight";
  Named fewer = three();
  fewer.pop_back();
  for (const Named& other : {bit, shape, name, fewer})
    EXPECT_NE(weights_fingerprint(other), "44a37492");
}

}  // namespace
}  // namespace tandem::train
