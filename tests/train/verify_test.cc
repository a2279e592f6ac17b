// tandem verify's findings from several ranks: a parameter held by two ranks (two replicas of
// a stage) is kept once when both hold the same bits, and named as out of step when they do not;
// the findings travel between ranks packed and come back the same.
#include "tandem/train/verify.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tandem::train {
namespace {

Findings rank(float value) {
  Findings f;
  f.gradients["a.weight"] = torch::full({2}, value);
  f.gradients["b.weight"] = torch::full({3}, 1.0f);
  return f;
}

TEST(VerifyFindings, ReplicasThatAgreeAreKeptOnce) {
  Findings all;
  all.merge(rank(0.5f));
  all.merge(rank(0.5f));
  EXPECT_EQ(all.gradients.size(), 2u);
  EXPECT_TRUE(all.replicas_differ.empty());
}

TEST(VerifyFindings, ReplicasOutOfStepAreNamed) {
  Findings all;
  all.merge(rank(0.5f));
  all.merge(rank(0.25f));
  all.merge(rank(0.125f));
  EXPECT_EQ(all.replicas_differ, (std::vector<std::string>{"a.weight"}));
  EXPECT_TRUE(torch::equal(all.gradients.at("a.weight"), torch::full({2}, 0.5f)));
}

TEST(VerifyFindings, PackedFindingsComeBackTheSame) {
  Findings f = rank(0.5f);
  f.has_loss = true;
  f.loss = 1.25;
  f.places[0].forward = {"cpu:0"};
  f.places[0].backward = {"cpu:1"};
  const Findings g = Findings::unpack(f.pack());
  EXPECT_TRUE(torch::equal(g.gradients.at("a.weight"), f.gradients.at("a.weight")));
  EXPECT_EQ(g.loss, 1.25);
  EXPECT_EQ(g.places.at(0).backward, (std::set<std::string>{"cpu:1"}));
}

}  // namespace
}  // namespace tandem::train
