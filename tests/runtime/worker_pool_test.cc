// The worker pool: every worker runs the job, and the errors come back in worker order,
// whatever the order they were thrown in.
#include "runtime/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

namespace tandem::runtime {
namespace {

std::string message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "";
}

TEST(WorkerPool, ErrorsComeBackInWorkerOrder) {
  WorkerPool pool(4, [](int) {});
  std::atomic<int> ran{0};
  std::atomic<bool> three_threw{false};
  // Worker 3 throws at once; worker 1 waits until worker 3's exception is on its way out (a
  // condition, not a delay) and throws after it: worker 1's error still comes first.
  auto errors = pool.run([&](int w) {
    ++ran;
    if (w == 1) {
      while (!three_threw.load()) std::this_thread::yield();
      throw std::runtime_error("worker 1");
    }
    if (w == 3) {
      try {
        throw std::runtime_error("worker 3");
      } catch (...) {
        three_threw = true;
        throw;
      }
    }
  });
  EXPECT_EQ(ran.load(), 4);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(message(errors[0]), "worker 1");
  EXPECT_EQ(message(errors[1]), "worker 3");
  // The next job starts clean.
  EXPECT_TRUE(pool.run([](int) {}).empty());
}

}  // namespace
}  // namespace tandem::runtime
