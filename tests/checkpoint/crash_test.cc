// Crash safety: a process killed with SIGKILL at any point of a save leaves the previous
// checkpoint loadable, and the next save succeeds.
//
// The saving process is a fork()ed child whose save hook raises SIGKILL at the chosen point:
// an honest kill -9 at that moment. fork() copies only the calling thread, so the child does no
// parallel work: save() runs on the calling thread and the tensors are small enough for LibTorch
// to copy them without its intra-op pool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/optimizer_state.h"
#include "helpers.h"
#include "tandem/checkpoint/all.h"

namespace tandem::checkpoint {
namespace {

using namespace testing;
namespace fs = std::filesystem;

// Runs save() in a child that is killed at `point`; returns how the child ended.
std::string save_killed_at(const runtime::Pipeline& p, const TrainState& state,
                           const std::string& dir, SavePoint point) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    try {
      SaveOptions o;
      o.keep = 1;
      o.hook = [point](SavePoint at, const std::string&) {
        if (at == point) ::raise(SIGKILL);
      };
      save(p, state, dir, o);
      code = 3;  // the hook never fired
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return "fork or wait failed";
  if (WIFSIGNALED(status)) return std::string("signal ") + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

class Crash : public ::testing::TestWithParam<SavePoint> {};

TEST_P(Crash, KillDuringSaveLeavesACompleteCheckpoint) {
  const SavePoint point = GetParam();
  TempDir dir;
  Recipe s;
  auto p = make_pipeline(s);
  train_until(*p, 2);
  save(*p, {2, 0, 16, 5}, dir.path(), keep(1));
  const auto at2 = snapshot(*p);
  train_until(*p, 3);
  const auto at3 = snapshot(*p);

  ASSERT_EQ(save_killed_at(*p, {3, 0, 24, 5}, dir.path(), point), "signal 9") << to_string(point);

  // Until `latest` names the new checkpoint, a resume takes the previous one.
  const bool new_one = point == SavePoint::kLatestWritten;
  Recipe other = s;
  other.init_seed = 99;
  auto resumed = make_pipeline(other);
  const TrainState state = load(*resumed, dir.path());
  EXPECT_EQ(state.step, new_one ? 3 : 2) << to_string(point);
  expect_bitwise_equal(snapshot(*resumed), new_one ? at3 : at2);
  EXPECT_EQ(fs::exists(dir / ".tmp-step-3"),
            point == SavePoint::kShardsWritten || point == SavePoint::kManifestWritten);
  EXPECT_EQ(fs::exists(dir / "step-3"), point == SavePoint::kRenamed || new_one);

  // The next save cleans up after the dead one and keeps only itself (keep 1).
  save(*p, {3, 0, 24, 5}, dir.path(), keep(1));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-3"}));
  auto again = make_pipeline(other);
  EXPECT_EQ(load(*again, dir.path()).step, 3);
  expect_bitwise_equal(snapshot(*again), at3);
}

INSTANTIATE_TEST_SUITE_P(AtEachPoint, Crash,
                         ::testing::Values(SavePoint::kShardsWritten, SavePoint::kManifestWritten,
                                           SavePoint::kRenamed, SavePoint::kLatestWritten),
                         [](const ::testing::TestParamInfo<SavePoint>& info) {
                           std::string name = to_string(info.param);
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Crash, KillBeforeTheFirstCheckpointLeavesNothingToLoad) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  train_until(*p, 1);
  ASSERT_EQ(save_killed_at(*p, {1, 0, 8, 5}, dir.path(), SavePoint::kManifestWritten), "signal 9");
  EXPECT_EQ(latest_checkpoint(dir.path()), "");
  auto q = make_pipeline(Recipe{});
  EXPECT_THROW_WITH(load(*q, dir.path()), "holds no complete checkpoint");
}

}  // namespace
}  // namespace tandem::checkpoint
