// A receive that times out follows the chain of waiting ranks (wait_query.h): run under mpirun
// with 2 and 4 ranks. The stopped-rank end of a chain is tested from outside, with a real
// SIGSTOP (tests/cli/mpi_faults.sh silent-rank).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "mpi/environment.h"
#include "mpi/mpi_transport.h"

namespace tandem::mpi {
// The job's environment, owned by main() (mpi_test_main.cc).
Environment& test_environment();
namespace {

using transport::MessageKey;
using namespace std::chrono_literals;

// Receives `key` from `peer` expecting a timeout; returns its message.
std::string timeout_message(MpiTransport& t, int rank, int peer, const MessageKey& key) {
  try {
    t.recv(rank, peer, key, c10::kCPU);
  } catch (const transport::CommTimeout& e) {
    return e.what();
  }
  ADD_FAILURE() << "rank " << rank << " received " << key.to_string() << ", never sent";
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rank r waits for rank r + 1; the last rank of the chain computes (it polls for a file, no
// message) until rank 0 has its report, then sends, and the chain unwinds. Rank 0 alone has a
// short timeout: it names each link and the end. No step depends on timing: rank 3 computes
// for as long as rank 0 needs, and the others' 60 s timeouts are never waited out.
TEST(WaitChain, NamesEachWaitingRankAndTheOneThatComputes) {
  Environment& env = test_environment();
  const int rank = env.rank(), size = env.size();
  if (size < 4) GTEST_SKIP() << "needs 4 ranks";
  MpiTransport t(env, Layout{size, 1}, MpiTransportOptions{rank == 0 ? 1.0 : 60.0});
  // Where rank 0 says it is done: a file named by rank 0's pid (all ranks share this machine).
  const std::string done = ::testing::TempDir() + "tandem_wait_chain_" +
                           t.all_gather_strings(std::to_string(::getpid()))[0];
  auto key = [](int from, int to) { return MessageKey{"h", 5, 0, false, from, to}; };
  if (rank == 0) {
    std::string m = timeout_message(t, 0, 1, key(1, 0));
    std::ofstream(done) << "done\n";
    EXPECT_TRUE(contains(m, "rank 0 waited 1 s for message " + key(1, 0).to_string())) << m;
    EXPECT_TRUE(contains(m, "; rank 1 has itself waited ")) << m;
    EXPECT_TRUE(contains(m, "for message " + key(2, 1).to_string() +
                                " from rank 2; rank 2 has "
                                "itself waited "))
        << m;
    EXPECT_TRUE(contains(m, "for message " + key(3, 2).to_string() +
                                " from rank 3; rank 3 "
                                "waits for no message (it computes, or waits in a collective)"))
        << m;
    EXPECT_FALSE(contains(m, "deadlock")) << m;
  } else if (rank == 3) {
    while (!std::filesystem::exists(done)) std::this_thread::sleep_for(10ms);
    t.send(3, 2, key(3, 2), torch::ones({1}), nullptr);
  } else if (rank < 3) {
    t.recv(rank, rank + 1, key(rank + 1, rank), c10::kCPU);
    t.send(rank, rank - 1, key(rank, rank - 1), torch::ones({1}), nullptr);
  }
  t.barrier();
  if (rank == 0) std::filesystem::remove(done);
}

// Ranks 0 and 1 each wait for the other, which never sends: both name the deadlock, whichever
// gives up first.
TEST(WaitChain, NamesADeadlock) {
  Environment& env = test_environment();
  const int rank = env.rank(), size = env.size();
  // Rank 0 gives up after 1 s and asks rank 1, which still waits (its timeout is 3 s; rank 0's
  // question takes a polling interval to answer, not seconds).
  MpiTransport t(env, Layout{size, 1}, MpiTransportOptions{rank == 0 ? 1.0 : 3.0});
  if (rank > 1) return;
  const int peer = 1 - rank;
  const MessageKey key{"x", 2, 1, true, peer, rank};
  std::string m = timeout_message(t, rank, peer, key);
  const MessageKey theirs{"x", 2, 1, true, rank, peer};
  EXPECT_TRUE(contains(m, fmt::format("rank {} has itself waited", peer))) << m;
  EXPECT_TRUE(contains(m, "for message " + theirs.to_string())) << m;
  EXPECT_TRUE(contains(m, fmt::format(": a deadlock, ranks {} -> {} -> {} each wait for the next",
                                      rank, peer, rank)))
      << m;
  // Rank 1 asks when rank 0 has already given up, and says so.
  if (rank == 1) {
    EXPECT_TRUE(contains(m, "(it gave up and reports too)")) << m;
  }
}

}  // namespace
}  // namespace tandem::mpi
