// main() of the MPI test binaries: runs the GoogleTest suite on every rank under one
// tandem::mpi::Environment and fails the job when any rank fails. Rank 0 prints the usual
// GoogleTest report; the other ranks print only their failures, prefixed "[rN/S]".
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "mpi/environment.h"

namespace tandem::mpi {

namespace {
Environment* environment = nullptr;
}  // namespace

// The job's environment, for the tests.
Environment& test_environment() { return *environment; }

}  // namespace tandem::mpi

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(std::string prefix) : prefix_(std::move(prefix)) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "%s %s:%d: failure\n%s\n", prefix_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "%s FAILED %s.%s\n", prefix_.c_str(), info.test_suite_name(),
                   info.name());
    }
  }

 private:
  std::string prefix_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tandem::mpi::Environment env(&argc, &argv);
  tandem::mpi::environment = &env;
  if (env.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(env.prefix()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (env.rank() == 0 && any_failed && !failed) {
    std::fprintf(stderr, "[r0/%d] tests failed on another rank (see its output above)\n",
                 env.size());
  }
  return any_failed;
}
