#include "tandem/memory/context.h"

#include <gtest/gtest.h>

#include <thread>

namespace tandem::memory {
namespace {

TEST(Where, DefaultsMeanNothingIsSet) {
  const Where& w = current_where();
  EXPECT_EQ(w.device, -1);
  EXPECT_EQ(w.stage, -1);
  EXPECT_EQ(w.microbatch, -1);
  EXPECT_TRUE(w.device_name.empty());
  EXPECT_TRUE(w.layer.empty());
  EXPECT_TRUE(w.phase.empty());
  EXPECT_EQ(describe(w), "");
}

TEST(ScopedWhere, NestsAndRestoresEachPart) {
  {
    ScopedWhere device(1, "cpu:1");
    EXPECT_EQ(current_where().device, 1);
    EXPECT_EQ(current_where().device_name, "cpu:1");
    {
      ScopedWhere action(2, "forward", 3);
      {
        ScopedWhere layer("a_layer_name_longer_than_sso_buffer");
        EXPECT_EQ(describe(current_where()),
                  "stage 2, layer a_layer_name_longer_than_sso_buffer (forward, micro-batch 3)");
        {
          ScopedWhere inner_layer("conv3");
          EXPECT_EQ(current_where().layer, "conv3");
        }
        EXPECT_EQ(current_where().layer, "a_layer_name_longer_than_sso_buffer");
      }
      EXPECT_EQ(current_where().layer, "");
      EXPECT_EQ(describe(current_where()), "stage 2 (forward, micro-batch 3)");
    }
    EXPECT_EQ(current_where().stage, -1);
    EXPECT_EQ(current_where().phase, "");
    EXPECT_EQ(current_where().microbatch, -1);
    EXPECT_EQ(current_where().device, 1);
  }
  EXPECT_EQ(current_where().device, -1);
  EXPECT_EQ(current_where().device_name, "");
}

TEST(ScopedWhere, IsPerThread) {
  ScopedWhere device(4, "cpu:4");
  int seen = 0;
  std::thread t([&seen] { seen = current_where().device; });
  t.join();
  EXPECT_EQ(seen, -1);
  EXPECT_EQ(current_where().device, 4);
}

TEST(Describe, LeavesOutWhatIsNotSet) {
  Where w;
  w.phase = "optimizer";
  EXPECT_EQ(describe(w), "optimizer");
  w.microbatch = 0;
  EXPECT_EQ(describe(w), "optimizer, micro-batch 0");
  w.stage = 0;
  EXPECT_EQ(describe(w), "stage 0 (optimizer, micro-batch 0)");
  w.phase.clear();
  w.layer = "fc";
  EXPECT_EQ(describe(w), "stage 0, layer fc (micro-batch 0)");
}

}  // namespace
}  // namespace tandem::memory
