// Dropout masks keyed by sample: the generator is Philox 4x32-10, a window of a sample draws
// the window of the whole sample's mask, and masks differ across samples, layers, steps and
// seeds while the same sample draws the same mask in whichever micro-batch it is.
#include "tandem/models/keyed_dropout.h"

#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/models/layers.h"

namespace tandem {
namespace {

using models::keyed_dropout_mask;

// Random123's known-answer tests for philox4x32-10 (kat_vectors: counter, key -> output): the
// engine the masks use is the published generator, so another implementation (a GPU kernel,
// NumPy's Philox) can reproduce them.
TEST(KeyedDropout, PhiloxIsThePublishedPhilox4x32_10) {
  struct Kat {
    uint64_t key, subsequence, offset;  // key {k0,k1}; counter {offset lo, hi, subsequence lo, hi}
    uint32_t want[4];
  };
  const Kat kats[] = {
      {0, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {~0ull, ~0ull, ~0ull, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {0x299f31d0a4093822ull,
       0x0370734413198a2eull,
       0x85a308d3243f6a88ull,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    at::philox_engine gen(k.key, k.subsequence, k.offset);
    for (uint32_t w : k.want) EXPECT_EQ(gen(), w) << std::hex << "key " << k.key;
  }
}

// Element e of sample i: lane e % 4 of Philox(key, {e / 4, i}), kept below keep * 2^32.
TEST(KeyedDropout, EachElementIsItsOwnPhiloxNumber) {
  const uint64_t key = 0x1234abcd5678ef01ull;
  const double keep = 0.6;
  torch::Tensor mask = keyed_dropout_mask(key, 5, {3, 7, 5}, keep);
  auto m = mask.accessor<float, 3>();
  const float scale = static_cast<float>(1.0 / keep);
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t e = 0; e < 35; ++e) {
      at::philox_engine gen(key, static_cast<uint64_t>(5 + b), static_cast<uint64_t>(e / 4));
      uint32_t u = 0;
      for (int64_t lane = 0; lane <= e % 4; ++lane) u = gen();
      const float want = static_cast<double>(u) < keep * 4294967296.0 ? scale : 0.0f;
      EXPECT_EQ(m[b][e / 5][e % 5], want) << "sample " << b << " element " << e;
    }
  }
}

TEST(KeyedDropout, KeepsAboutTheKeepProbabilityScaled) {
  // 10^6 elements: the kept fraction's standard deviation is sqrt(0.7 * 0.3 / 10^6) = 4.6e-4;
  // the mask is a fixed function of the key, so this checks one draw, within 4 deviations.
  torch::Tensor mask = keyed_dropout_mask(7, 0, {100, 10000}, 0.7);
  const float scale = static_cast<float>(1.0 / 0.7);
  torch::Tensor kept = mask == scale;
  EXPECT_TRUE((kept | (mask == 0)).all().item<bool>()) << "values other than 0 and 1/keep";
  EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 0.7, 2e-3);
  EXPECT_TRUE(keyed_dropout_mask(7, 0, {4, 9}, 1.0).eq(1.0f).all().item<bool>());
}

// The spatial split's contract: a device that holds a window of each sample draws exactly the
// window of the whole sample's mask.
TEST(KeyedDropout, AWindowOfAVolumeDrawsTheSliceOfTheWholeMask) {
  const uint64_t key = 99;
  const std::vector<int64_t> full = {3, 8, 10, 6};  // C, D, H, W of one sample
  torch::Tensor whole = keyed_dropout_mask(key, 4, {2, 3, 8, 10, 6}, 0.5);
  // A depth slab (the spatial split's cut) and a window in every dimension.
  struct Cut {
    std::vector<int64_t> offsets, sizes;
  };
  for (const Cut& c : {Cut{{0, 5, 0, 0}, {3, 3, 10, 6}}, Cut{{1, 2, 3, 1}, {2, 4, 5, 4}},
                       Cut{{0, 0, 0, 5}, {3, 8, 10, 1}}}) {
    graph::SampleWindow w{c.offsets, full};
    std::vector<int64_t> sizes = {2};
    sizes.insert(sizes.end(), c.sizes.begin(), c.sizes.end());
    torch::Tensor got = keyed_dropout_mask(key, 4, sizes, 0.5, w);
    torch::Tensor want = whole;
    for (int k = 0; k < 4; ++k) want = want.narrow(k + 1, c.offsets[k], c.sizes[k]);
    EXPECT_TRUE(torch::equal(got, want))
        << "window at " << fmt::format("{}", fmt::join(c.offsets, ","));
  }
  // The whole sample as a window is the whole mask.
  EXPECT_TRUE(torch::equal(
      keyed_dropout_mask(key, 4, {2, 3, 8, 10, 6}, 0.5, graph::SampleWindow{{0, 0, 0, 0}, full}),
      whole));
}

TEST(KeyedDropout, RefusesWindowsThatDoNotFit) {
  const std::vector<int64_t> full = {4, 4};
  EXPECT_THROW(keyed_dropout_mask(1, 0, {2, 3, 4}, 0.5, graph::SampleWindow{{2, 0}, full}), Error);
  EXPECT_THROW(keyed_dropout_mask(1, 0, {2, 3, 4}, 0.5, graph::SampleWindow{{0}, {4}}), Error);
  EXPECT_THROW(keyed_dropout_mask(1, 0, {2, 3}, 0.0), Error);
  EXPECT_THROW(keyed_dropout_mask(1, -1, {2, 3}, 0.5), Error);
}

TEST(KeyedDropout, SameSampleSameMaskInWhicheverMicrobatch) {
  // Samples 0..11 in one call, and as micro-batches [0,5), [5,9), [9,12).
  torch::Tensor whole = keyed_dropout_mask(3, 0, {12, 6, 7}, 0.5);
  for (auto [first, size] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 4}, {9, 3}}) {
    EXPECT_TRUE(
        torch::equal(keyed_dropout_mask(3, first, {size, 6, 7}, 0.5), whole.narrow(0, first, size)))
        << "samples " << first << ".." << first + size - 1;
  }
}

// One sample's mask for a CallContext, drawn through the KeyedDropout layer on a tensor of ones.
torch::Tensor layer_mask(const graph::CallContext& ctx, int64_t samples = 1) {
  graph::ScopedCall call(ctx);
  models::KeyedDropout dropout(0.5);
  return dropout->forward(torch::ones({samples, 64}));
}

TEST(KeyedDropout, MasksDifferAcrossSamplesLayersStepsAndSeeds) {
  graph::CallContext base;
  base.seed = 1;
  base.step = 2;
  base.layer = 3;
  base.sample_offset = 4;
  const torch::Tensor mask = layer_mask(base);
  auto with = [&](auto change) {
    graph::CallContext c = base;
    change(c);
    return layer_mask(c);
  };
  // 64 elements at keep 0.5: two independent masks agree everywhere with probability 2^-64.
  EXPECT_FALSE(torch::equal(mask, with([](auto& c) { c.sample_offset = 5; }))) << "sample";
  EXPECT_FALSE(torch::equal(mask, with([](auto& c) { c.layer = 4; }))) << "layer";
  EXPECT_FALSE(torch::equal(mask, with([](auto& c) { c.step = 3; }))) << "step";
  EXPECT_FALSE(torch::equal(mask, with([](auto& c) { c.seed = 2; }))) << "seed";
  // The micro-batch's number is not part of the key: only where its samples are.
  EXPECT_TRUE(torch::equal(mask, with([](auto& c) { c.microbatch = 7; })));
  // Samples of one call differ from each other, and the second is the next sample's mask.
  torch::Tensor two = layer_mask(base, 2);
  EXPECT_FALSE(torch::equal(two[0], two[1]));
  EXPECT_TRUE(torch::equal(two[0], mask[0]));
  EXPECT_TRUE(torch::equal(two[1], with([](auto& c) { c.sample_offset = 5; })[0]));
  // Off in evaluation.
  EXPECT_TRUE(torch::equal(with([](auto& c) { c.training = false; }), torch::ones({1, 64})));
}

}  // namespace
}  // namespace tandem
