// MpiTransport point-to-point tests: run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "mpi/environment.h"
#include "mpi/mpi_transport.h"
#include "mpi/wire.h"
#include "tandem/common/check.h"
#include "tandem/memory/context.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/memory/tracker.h"

namespace tandem::mpi {
// The job's environment, owned by main() (mpi_test_main.cc).
Environment& test_environment();
namespace {

using transport::MessageKey;
using namespace std::chrono_literals;

// The value sent from `rank` for micro-batch `m`: a shape that changes with m, values that
// name the sender. Shapes include a scalar, an empty tensor and a 16 MiB one (MPI's
// rendezvous path).
torch::Tensor payload(int rank, int m, c10::ScalarType dtype) {
  static const std::vector<std::vector<int64_t>> shapes = {{3},    {2, 5},    {},
                                                           {0, 4}, {4, 1, 3}, {1024, 4096}};
  const auto& shape = shapes[m % shapes.size()];
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (torch::arange(n, torch::TensorOptions().dtype(dtype)) + 1000 * rank + m).reshape(shape);
}

class MpiTransportTest : public ::testing::Test {
 protected:
  // Each test builds its own transport; a short timeout makes a failure on one rank end the
  // others' waits quickly instead of hanging them.
  Environment& env() { return test_environment(); }
  const int rank_ = test_environment().rank();
  const int size_ = test_environment().size();
};

TEST_F(MpiTransportTest, RingOfFloatAndInt64TensorsOfChangingShapes) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  const int kMicrobatches = 6;
  for (int m = 0; m < kMicrobatches; ++m) {
    t.send(rank_, next, MessageKey{"act", 0, m, false, rank_, next}, payload(rank_, m, c10::kFloat),
           nullptr);
    t.send(rank_, next, MessageKey{"ids", 0, m, false, rank_, next}, payload(rank_, m, c10::kLong),
           nullptr);
  }
  for (int m = 0; m < kMicrobatches; ++m) {
    torch::Tensor a = t.recv(rank_, prev, MessageKey{"act", 0, m, false, prev, rank_}, c10::kCPU);
    torch::Tensor i = t.recv(rank_, prev, MessageKey{"ids", 0, m, false, prev, rank_}, c10::kCPU);
    EXPECT_EQ(a.scalar_type(), c10::kFloat);
    EXPECT_EQ(i.scalar_type(), c10::kLong);
    EXPECT_TRUE(a.equal(payload(prev, m, c10::kFloat))) << "micro-batch " << m;
    EXPECT_TRUE(i.equal(payload(prev, m, c10::kLong))) << "micro-batch " << m;
  }
}

TEST_F(MpiTransportTest, OutOfOrderArrival) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  // Pairs (0,1), (2,3): the even rank sends A then B, the odd one receives B then A. MPI does
  // not let B overtake A, so A always arrives first and waits while B is asked for, whenever
  // the receiver asks (no delay needed to make it so).
  const int peer = rank_ ^ 1;
  if (peer >= size_) GTEST_SKIP() << "no partner rank";
  MessageKey a{"h", 1, 0, false, 0, 1}, b{"h", 1, 1, false, 0, 1};
  if (rank_ % 2 == 0) {
    t.send(rank_, peer, a, torch::full({5}, 1.5), nullptr);
    t.send(rank_, peer, b, torch::full({2, 2}, -2.5), nullptr);
  } else {
    torch::Tensor tb = t.recv(rank_, peer, b, c10::kCPU);
    torch::Tensor ta = t.recv(rank_, peer, a, c10::kCPU);
    EXPECT_TRUE(tb.equal(torch::full({2, 2}, -2.5)));
    EXPECT_TRUE(ta.equal(torch::full({5}, 1.5)));
  }
}

TEST_F(MpiTransportTest, GradientFlagAndStagesAreKeyParts) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  const int peer = rank_ ^ 1;
  if (peer >= size_) GTEST_SKIP() << "no partner rank";
  // The same tensor name and micro-batch, once as activation and once as gradient.
  t.send(rank_, peer, MessageKey{"x", 0, 0, true, 1, 0}, torch::full({1}, 2.0), nullptr);
  t.send(rank_, peer, MessageKey{"x", 0, 0, false, 0, 1}, torch::full({1}, 1.0), nullptr);
  EXPECT_EQ(t.recv(rank_, peer, MessageKey{"x", 0, 0, false, 0, 1}, c10::kCPU).item<double>(), 1.0);
  EXPECT_EQ(t.recv(rank_, peer, MessageKey{"x", 0, 0, true, 1, 0}, c10::kCPU).item<double>(), 2.0);
}

TEST_F(MpiTransportTest, ReceivedTensorsShareNoStorage) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  torch::Tensor src = torch::randn({8, 3});
  t.send(rank_, next, MessageKey{"s", 0, 0}, src, nullptr);
  t.send(rank_, next, MessageKey{"s", 0, 1}, src, nullptr);
  // A non-contiguous view travels as its values.
  t.send(rank_, next, MessageKey{"s", 0, 2}, src.t(), nullptr);
  torch::Tensor r0 = t.recv(rank_, prev, MessageKey{"s", 0, 0}, c10::kCPU);
  torch::Tensor r1 = t.recv(rank_, prev, MessageKey{"s", 0, 1}, c10::kCPU);
  torch::Tensor r2 = t.recv(rank_, prev, MessageKey{"s", 0, 2}, c10::kCPU);
  for (const torch::Tensor& r : {r0, r1, r2}) {
    EXPECT_EQ(r.storage().use_count(), 1u);
    EXPECT_EQ(r.storage_offset(), 0);
    EXPECT_EQ(r.storage().nbytes(), static_cast<size_t>(r.numel() * r.element_size()));
    EXPECT_FALSE(r.is_alias_of(src));
  }
  EXPECT_NE(r0.data_ptr(), r1.data_ptr());
  EXPECT_TRUE(r0.equal(r1));
  EXPECT_TRUE(r2.is_contiguous());
  EXPECT_TRUE(r2.equal(r0.t()));

  // To itself: no MPI, still a tensor of its own.
  t.send(rank_, rank_, MessageKey{"self", 0, 0}, src, nullptr);
  torch::Tensor mine = t.recv(rank_, rank_, MessageKey{"self", 0, 0}, c10::kCPU);
  EXPECT_FALSE(mine.is_alias_of(src));
  EXPECT_EQ(mine.storage().use_count(), 1u);
  mine.add_(1);
  EXPECT_FALSE(mine.equal(src));
}

// What arrives through MPI lands in buffers the progress thread allocated, outside the
// allocator hook: recv charges it to the receiving thread's device while it lives (a budget
// included), as an in-process receiver's own copy is charged.
TEST_F(MpiTransportTest, ReceivedTensorsAreChargedToTheReceivingDevice) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  auto big_of = [](int r) { return torch::full({1024, 256}, r, torch::kFloat); };  // pooled
  auto small_of = [](int r) { return torch::full({4}, r, torch::kFloat); };
  const torch::Tensor big = big_of(rank_), small = small_of(rank_);
  memory::Tracker& tracker = memory::Tracker::global();
  const int device = 7;  // a tracker device of this test's own
  tracker.register_device(device, "cpu:7");
  memory::ScopedWhere where(device, "cpu:7");
  const uint64_t before = tracker.current(device);
  for (int m = 0; m < 3; ++m) {
    t.send(rank_, next, MessageKey{"c", 0, m}, m == 1 ? small : big, nullptr);
  }
  torch::Tensor r0 = t.recv(rank_, prev, MessageKey{"c", 0, 0}, c10::kCPU);
  EXPECT_EQ(tracker.current(device), before + r0.nbytes());
  torch::Tensor r1 = t.recv(rank_, prev, MessageKey{"c", 0, 1}, c10::kCPU);
  EXPECT_EQ(tracker.current(device), before + r0.nbytes() + r1.nbytes());
  EXPECT_TRUE(r0.equal(big_of(prev)));
  EXPECT_TRUE(r1.equal(small_of(prev)));
  r0 = torch::Tensor();
  r1 = torch::Tensor();
  EXPECT_EQ(tracker.current(device), before);
  // Over the device's budget: the receive fails like an allocation would.
  tracker.set_budget(device, before + big.nbytes() - 1);
  EXPECT_THROW(t.recv(rank_, prev, MessageKey{"c", 0, 2}, c10::kCPU), memory::OutOfMemory);
  tracker.set_budget(device, 0);
  EXPECT_EQ(tracker.current(device), before);
}

TEST_F(MpiTransportTest, RefusesDevicesItDoesNotOwn) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  EXPECT_EQ(t.num_devices(), size_);
  EXPECT_EQ(t.local_devices(), std::vector<int>{rank_});
  const int other = (rank_ + 1) % size_;
  EXPECT_THROW(t.send(other, rank_, MessageKey{"x"}, torch::ones({1}), nullptr), Error);
  EXPECT_THROW(t.send(rank_, size_, MessageKey{"x"}, torch::ones({1}), nullptr), Error);
  EXPECT_THROW(t.recv(other, rank_, MessageKey{"x"}, c10::kCPU), Error);
  EXPECT_THROW(t.recv(rank_, -1, MessageKey{"x"}, c10::kCPU), Error);
}

TEST_F(MpiTransportTest, RecvTimesOutNamingRankPeerAndKey) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{1.0});
  const int peer = rank_ ^ 1;
  if (peer >= size_) GTEST_SKIP() << "no partner rank";
  MessageKey sent{"other", 4, 0, false, 1, 0}, never{"never", 4, 2, true, 1, 0};
  if (rank_ % 2 == 1) {
    t.send(rank_, peer, sent, torch::ones({2}), nullptr);
    return;
  }
  auto start = std::chrono::steady_clock::now();
  try {
    t.recv(rank_, peer, never, c10::kCPU);
    ADD_FAILURE() << "recv of a message never sent returned";
  } catch (const transport::CommTimeout& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("rank {} waited 1 s", rank_)), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("from rank {}", peer)), std::string::npos) << m;
    EXPECT_NE(m.find(never.to_string()), std::string::npos) << m;
    EXPECT_NE(m.find("arrived and waits unreceived: " + sent.to_string()), std::string::npos) << m;
  }
  // Not before the 1 s timeout (the deadline is on the steady clock, read after `start`), and
  // not at some other one: the default is 300 s, and what remains after the deadline is one
  // wake-up and the error message, which two busy loops on two cores delay by milliseconds,
  // not the 9 s this bound leaves.
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.99);
  EXPECT_LT(waited, 10.0);
}

TEST_F(MpiTransportTest, ManyThreadsSendAndReceiveAtOnce) {
  MpiTransport t(env(), Layout{size_, 1}, MpiTransportOptions{30.0});
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  constexpr int kThreads = 4, kMessages = 25;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      const std::string name = "t" + std::to_string(th);
      for (int m = 0; m < kMessages; ++m) {
        t.send(rank_, next, MessageKey{name, 0, m, false, rank_, next},
               torch::full({m + 1}, double(rank_ * 100 + m)), nullptr);
      }
      for (int m = kMessages - 1; m >= 0; --m) {  // the reverse of the sending order
        torch::Tensor r =
            t.recv(rank_, prev, MessageKey{name, 0, m, false, prev, rank_}, c10::kCPU);
        if (!r.equal(torch::full({m + 1}, double(prev * 100 + m)))) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace tandem::mpi
