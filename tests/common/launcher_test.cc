// The launcher's environment variables, read without MPI.
#include "common/launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace tandem {
namespace {

// Clears the variables launchers set for the test's duration, and restores them after.
class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kNames) {
      unsetenv(name);
      if (auto it = saved_.find(name); it != saved_.end()) setenv(name, it->second.c_str(), 1);
    }
  }
  static constexpr const char* kNames[] = {
      "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",   "SLURM_STEP_NUM_TASKS",
      "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
  std::map<std::string, std::string> saved_;
};

TEST_F(LauncherEnv, NoLauncherMeansOneProcess) {
  EXPECT_FALSE(launched_by_mpi_launcher());
  EXPECT_EQ(launched_world_size(), 1);
  EXPECT_EQ(launched_rank(), -1);
}

TEST_F(LauncherEnv, ReadsEachLaunchersRankRankZeroIncluded) {
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  EXPECT_EQ(launched_rank(), 0);
  unsetenv("OMPI_COMM_WORLD_RANK");
  setenv("PMI_RANK", "2", 1);
  EXPECT_EQ(launched_rank(), 2);
  unsetenv("PMI_RANK");
  setenv("SLURM_PROCID", "-1", 1);  // not a rank
  EXPECT_EQ(launched_rank(), -1);
  setenv("PMIX_RANK", "5", 1);
  EXPECT_EQ(launched_rank(), 5);
}

TEST_F(LauncherEnv, ReadsEachLaunchersSize) {
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_TRUE(launched_by_mpi_launcher());
  EXPECT_EQ(launched_world_size(), 4);
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("PMI_SIZE", "3", 1);
  EXPECT_TRUE(launched_by_mpi_launcher());
  EXPECT_EQ(launched_world_size(), 3);
  unsetenv("PMI_SIZE");
  setenv("SLURM_STEP_NUM_TASKS", "8", 1);
  EXPECT_TRUE(launched_by_mpi_launcher());
  EXPECT_EQ(launched_world_size(), 8);
}

TEST_F(LauncherEnv, ALauncherThatGivesNoSizeCountsAsOneRank) {
  setenv("PMIX_RANK", "0", 1);
  EXPECT_TRUE(launched_by_mpi_launcher());
  EXPECT_EQ(launched_world_size(), 1);
  setenv("OMPI_COMM_WORLD_SIZE", "two", 1);  // not a number
  EXPECT_EQ(launched_world_size(), 1);
}

}  // namespace
}  // namespace tandem
