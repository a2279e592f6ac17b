// The in-process transport on its own: messages found by key and sender, the communication
// timeout, a receiver that owns what it receives, whose memory holds the copy from the moment it
// is made, abort and reset.
#include "tandem/transport/inprocess.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <future>
#include <thread>

#include "memory/cpu_allocator.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"

namespace tandem::transport {
namespace {

using std::chrono::milliseconds;

// Two CPU devices and the transport between them.
struct TwoDevices {
  explicit TwoDevices(milliseconds timeout)
      : a(DeviceSpec{"cpu:0", c10::kCPU, 1}),
        b(DeviceSpec{"cpu:1", c10::kCPU, 1}),
        transport({&a, &b}, timeout) {}
  DeviceContext a, b;
  InProcessTransport transport;
};

MessageKey key(const std::string& tensor, int mb, bool gradient = false) {
  MessageKey k;
  k.tensor = tensor;
  k.step = 3;
  k.microbatch = mb;
  k.gradient = gradient;
  k.from_stage = 0;
  k.to_stage = 1;
  return k;
}

TEST(InProcessTransport, FindsEachMessageByKeyAndSenderWhateverTheOrder) {
  TwoDevices d(milliseconds(60'000));
  d.transport.send(0, 1, key("h", 1), torch::full({2}, 1.0f), nullptr);
  d.transport.send(0, 1, key("h", 0), torch::full({2}, 0.0f), nullptr);
  d.transport.send(0, 1, key("h", 0, /*gradient=*/true), torch::full({2}, 2.0f), nullptr);
  d.transport.send(1, 1, key("h", 0), torch::full({2}, 3.0f), nullptr);
  EXPECT_EQ(d.transport.pending(), 4u);
  EXPECT_EQ(d.transport.recv(1, 0, key("h", 0), c10::kCPU)[0].item<float>(), 0.0f);
  EXPECT_EQ(d.transport.recv(1, 1, key("h", 0), c10::kCPU)[0].item<float>(), 3.0f);
  EXPECT_EQ(d.transport.recv(1, 0, key("h", 0, true), c10::kCPU)[0].item<float>(), 2.0f);
  EXPECT_EQ(d.transport.recv(1, 0, key("h", 1), c10::kCPU)[0].item<float>(), 1.0f);
  EXPECT_EQ(d.transport.pending(), 0u);
}

// --comm-timeout: a receive whose message never comes ends with CommTimeout after (never
// before) the timeout, naming the receiver, the message, the sender and the option.
TEST(InProcessTransport, ARecvThatNothingAnswersEndsAfterTheCommTimeout) {
  TwoDevices d(milliseconds(200));
  // A message for another micro-batch does not answer it.
  d.transport.send(0, 1, key("h", 1), torch::ones({2}), nullptr);
  const auto start = std::chrono::steady_clock::now();
  try {
    d.transport.recv(1, 0, key("h", 2), c10::kCPU);
    FAIL() << "no timeout";
  } catch (const CommTimeout& e) {
    // A lower bound only: the wait may take longer on a loaded machine, never less.
    EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(200));
    EXPECT_EQ(
        std::string(e.what()),
        fmt::format("device 1 waited 0.2 s for {} from device 0; the sender never sent it "
                    "(raise PipelineOptions::comm_timeout if a step legitimately takes this long)",
                    key("h", 2).to_string()));
  }
  EXPECT_FALSE(d.transport.aborted()) << "a timeout is the receiver's failure, not an abort";
  EXPECT_EQ(d.transport.pending(), 1u);
}

// A message that comes while the receiver waits is received: the timeout bounds the wait, it
// is not a delay.
TEST(InProcessTransport, AMessageSentWhileTheReceiverWaitsIsReceived) {
  TwoDevices d(milliseconds(60'000));
  auto received = std::async(std::launch::async,
                             [&] { return d.transport.recv(1, 0, key("h", 0), c10::kCPU); });
  d.transport.send(0, 1, key("h", 0), torch::arange(4, torch::kFloat), nullptr);
  EXPECT_TRUE(torch::equal(received.get(), torch::arange(4, torch::kFloat)));
}

// The receiver copies: what it gets shares no memory with what was sent, in either direction,
// and comes contiguous whatever the sender's strides.
TEST(InProcessTransport, TheReceiverCopiesAndNeverAliasesTheSendersTensor) {
  TwoDevices d(milliseconds(60'000));
  torch::Tensor sent = torch::arange(6, torch::kFloat).reshape({2, 3});
  d.transport.send(0, 1, key("h", 0), sent, nullptr);
  torch::Tensor got = d.transport.recv(1, 0, key("h", 0), c10::kCPU);
  EXPECT_TRUE(torch::equal(got, sent));
  EXPECT_FALSE(got.is_alias_of(sent));
  EXPECT_NE(got.data_ptr(), sent.data_ptr());
  sent.fill_(-1.0f);
  EXPECT_TRUE(torch::equal(got, torch::arange(6, torch::kFloat).reshape({2, 3})));
  got.fill_(7.0f);
  EXPECT_TRUE(torch::equal(sent, torch::full({2, 3}, -1.0f)));

  torch::Tensor strided = torch::arange(6, torch::kFloat).reshape({2, 3}).t();  // [3, 2]
  d.transport.send(0, 1, key("h", 1), strided, nullptr);
  torch::Tensor got2 = d.transport.recv(1, 0, key("h", 1), c10::kCPU);
  EXPECT_TRUE(got2.is_contiguous());
  EXPECT_TRUE(torch::equal(got2, strided));
  EXPECT_FALSE(got2.is_alias_of(strided));
}

// Whose memory a message is in, with CPU accounting (devices 0 and 1 are the tracker's too):
// sent to a receiver that waits for it, the receiver's from the send on, and the sender's bytes
// are gone when its send returns, whenever the system runs the receiver's thread next; sent
// before the receiver waits, the sender's until the receiver takes its copy.
TEST(InProcessTransport, AWaitingReceiversCopyIsMadeAtTheSend) {
  memory::install_cpu_accounting();
  memory::Tracker& tracker = memory::Tracker::global();
  TwoDevices d(milliseconds(60'000));
  const uint64_t sender = tracker.current(0), receiver = tracker.current(1);
  constexpr uint64_t kBytes = 1 << 20;
  auto received = std::async(std::launch::async, [&] {
    memory::ScopedWhere on(1, "cpu:1");
    return d.transport.recv(1, 0, key("g", 0, true), c10::kCPU);
  });
  while (d.transport.awaited() == 0) std::this_thread::yield();
  {
    memory::ScopedWhere on(0, "cpu:0");
    torch::Tensor g = torch::full({256, 1024}, 2.0f);
    ASSERT_EQ(tracker.current(0), sender + kBytes);
    d.transport.send(0, 1, key("g", 0, true), g, nullptr);
  }
  EXPECT_EQ(tracker.current(0), sender);
  EXPECT_EQ(tracker.current(1), receiver + kBytes);
  torch::Tensor got = received.get();
  EXPECT_TRUE(torch::equal(got, torch::full({256, 1024}, 2.0f)));
  EXPECT_EQ(d.transport.awaited(), 0u);
  got = torch::Tensor();
  EXPECT_EQ(tracker.current(1), receiver);

  {
    memory::ScopedWhere on(0, "cpu:0");
    d.transport.send(0, 1, key("g", 1, true), torch::full({256, 1024}, 3.0f), nullptr);
  }
  EXPECT_EQ(tracker.current(0), sender + kBytes);
  EXPECT_EQ(tracker.current(1), receiver);
  {
    memory::ScopedWhere on(1, "cpu:1");
    got = d.transport.recv(1, 0, key("g", 1, true), c10::kCPU);
  }
  EXPECT_EQ(tracker.current(0), sender);
  EXPECT_EQ(tracker.current(1), receiver + kBytes);
  EXPECT_TRUE(torch::equal(got, torch::full({256, 1024}, 3.0f)));
}

TEST(InProcessTransport, AbortWakesAWaitingRecvAndRefusesSends) {
  TwoDevices d(milliseconds(600'000));
  auto waiting = std::async(std::launch::async, [&] {
    try {
      d.transport.recv(1, 0, key("h", 0), c10::kCPU);
      return std::string("received");
    } catch (const Aborted& e) {
      return std::string(e.what());
    }
  });
  d.transport.abort("device 0 failed");
  d.transport.abort("a second reason is ignored");
  EXPECT_EQ(waiting.get(), "device 0 failed");
  EXPECT_TRUE(d.transport.aborted());
  EXPECT_THROW(d.transport.send(0, 1, key("h", 1), torch::ones({1}), nullptr), Aborted);
}

// reset(): what the runtime calls after a failed step. Messages of the failed step are gone and
// the transport works again.
TEST(InProcessTransport, ResetForgetsMessagesAndClearsTheAbort) {
  TwoDevices d(milliseconds(100));
  d.transport.send(0, 1, key("h", 0), torch::ones({1}), nullptr);
  d.transport.abort("failed");
  Transport& t = d.transport;  // through the interface, as the runtime calls it
  t.reset();
  EXPECT_FALSE(d.transport.aborted());
  EXPECT_EQ(d.transport.pending(), 0u);
  EXPECT_THROW(d.transport.recv(1, 0, key("h", 0), c10::kCPU), CommTimeout);
  d.transport.send(0, 1, key("h", 0), torch::full({1}, 5.0f), nullptr);
  EXPECT_EQ(d.transport.recv(1, 0, key("h", 0), c10::kCPU).item<float>(), 5.0f);
}

}  // namespace
}  // namespace tandem::transport
