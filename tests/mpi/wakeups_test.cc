// The ranks' wake-ups (mpi/wakeups.h): every rank of this machine can wake every other, a post
// ends a peer's wait at once, a wait that nobody posts lasts its timeout, and a post made
// before the wait is not lost. Run under mpirun with 2 and 4 ranks, all on this machine.
#include "mpi/wakeups.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "mpi/environment.h"

namespace tandem::mpi {
Environment& test_environment();
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Wakeups, EveryRankOfThisMachineWakesEveryOther) {
  Environment& env = test_environment();
  Wakeups w(env.world());
  for (int r = 0; r < env.size(); ++r) EXPECT_TRUE(w.woken_by(r)) << "rank " << r;
  EXPECT_FALSE(w.woken_by(-1));
  EXPECT_FALSE(w.woken_by(env.size()));
  MPI_Barrier(env.world());
}

TEST(Wakeups, APostEndsAPeersWaitAndAnUnpostedWaitLastsItsTimeout) {
  Environment& env = test_environment();
  Wakeups w(env.world());
  const int rank = env.rank(), size = env.size();
  // Nobody posts: the whole timeout passes.
  const auto start = Clock::now();
  EXPECT_FALSE(w.wait(20ms));
  EXPECT_GE(Clock::now() - start, 20ms);
  MPI_Barrier(env.world());
  // Each rank posts the next one around the ring after the barrier; the next one waits up to a
  // minute and returns posted.
  w.post((rank + 1) % size);
  EXPECT_TRUE(w.wait(60s));
  MPI_Barrier(env.world());
  // Posts made before the wait are all taken by one wait.
  w.post_self();
  w.post_self();
  EXPECT_TRUE(w.wait(0us));
  EXPECT_FALSE(w.wait(1ms));
  // Posting a rank that is not there does nothing.
  w.post(-1);
  w.post(size);
  EXPECT_FALSE(w.wait(1ms));
  MPI_Barrier(env.world());
}

}  // namespace
}  // namespace tandem::mpi
