// The fault-injecting transport over the in-process one: which message a fault picks, what each
// kind does to it, its text form, and reset(). What a fault does to a whole step is in
// tests/runtime/faults_test.cc, and to an MPI job in tests/mpi/faults.cmake.
#include "tandem/transport/faulty.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <future>

#include "tandem/transport/inprocess.h"

namespace tandem::transport {
namespace {

using std::chrono::milliseconds;

MessageKey key(const std::string& tensor, int mb, bool gradient = false) {
  MessageKey k;
  k.tensor = tensor;
  k.step = 0;
  k.microbatch = mb;
  k.gradient = gradient;
  k.from_stage = gradient ? 1 : 0;
  k.to_stage = gradient ? 0 : 1;
  return k;
}

// Two CPU devices, the in-process transport between them, and `faults` around it.
struct Faulty {
  Faulty(std::vector<Fault> faults, milliseconds timeout)
      : a(DeviceSpec{"cpu:0", c10::kCPU, 1}), b(DeviceSpec{"cpu:1", c10::kCPU, 1}) {
    inner =
        std::make_shared<InProcessTransport>(std::vector<const DeviceContext*>{&a, &b}, timeout);
    faulty = std::make_unique<FaultyTransport>(inner, std::move(faults));
  }
  DeviceContext a, b;
  std::shared_ptr<InProcessTransport> inner;
  std::unique_ptr<FaultyTransport> faulty;
};

TEST(Fault, PrintsAndParses) {
  for (const std::string text :
       {"drop", "drop:tensor=h1,step=2,mb=3,grad=1,from-stage=1,to-stage=0,from=1,to=0,nth=2",
        "delay:grad=0,ms=3600000", "corrupt-shape:mb=1", "corrupt-dtype:to=1", "throw:tensor=x"}) {
    EXPECT_EQ(parse_fault(text).to_string(), text);
  }
  const Fault f = parse_fault("delay:mb=4,nth=3,ms=250");
  EXPECT_EQ(f.kind, FaultKind::kDelay);
  EXPECT_EQ(f.match.microbatch, 4);
  EXPECT_FALSE(f.match.tensor.has_value());
  EXPECT_EQ(f.nth, 3);
  EXPECT_EQ(f.delay, milliseconds(250));
}

TEST(Fault, RefusesWhatItCannotRead) {
  auto message = [](const std::string& text) {
    try {
      parse_fault(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("lose:mb=1"),
            "fault 'lose:mb=1': unknown kind 'lose'; use drop, delay, corrupt-shape, "
            "corrupt-dtype, zero or throw");
  EXPECT_EQ(message("drop:rank=1"),
            "fault 'drop:rank=1': unknown field 'rank'; use tensor, step, mb, grad, from-stage, "
            "to-stage, from, to, nth or ms");
  EXPECT_EQ(message("drop:mb=x"), "fault 'drop:mb=x': mb=x is not an integer");
  EXPECT_EQ(message("drop:grad=2"), "fault 'drop:grad=2': grad=2 must be 0 or 1");
  EXPECT_EQ(message("drop:nth=0"), "fault 'drop:nth=0': nth=0 must be at least 1");
  EXPECT_EQ(message("delay:mb=1"), "fault 'delay:mb=1': a delay needs ms=MILLISECONDS");
  EXPECT_EQ(message("drop:ms=5"), "fault 'drop:ms=5': ms= is for delay faults only");
  EXPECT_EQ(message("drop:mb"), "fault 'drop:mb': 'mb' is not FIELD=VALUE");
}

// The nth matching message fires, once; the others, and messages that do not match, pass.
TEST(FaultyTransport, FiresOnTheNthMatchingMessageOnly) {
  Faulty f({parse_fault("drop:tensor=h,grad=0,nth=2")}, milliseconds(100));
  for (int mb = 0; mb < 4; ++mb) {
    f.faulty->send(0, 1, key("h", mb), torch::full({1}, mb), nullptr);
    f.faulty->send(0, 1, key("other", mb), torch::full({1}, mb), nullptr);
    f.faulty->send(1, 0, key("h", mb, /*gradient=*/true), torch::full({1}, mb), nullptr);
  }
  EXPECT_EQ(f.faulty->fired(0), 1);
  EXPECT_EQ(f.inner->pending(), 11u);
  for (int mb : {0, 2, 3}) EXPECT_EQ(f.faulty->recv(1, 0, key("h", mb), c10::kCPU).item<int>(), mb);
  EXPECT_THROW(f.faulty->recv(1, 0, key("h", 1), c10::kCPU), CommTimeout);
}

TEST(FaultyTransport, DelayDeliversLater) {
  Faulty f({parse_fault("delay:mb=0,ms=20")}, milliseconds(600'000));
  f.faulty->send(0, 1, key("h", 0), torch::full({1}, 3.0f), nullptr);
  EXPECT_EQ(f.faulty->recv(1, 0, key("h", 0), c10::kCPU).item<float>(), 3.0f);
  EXPECT_EQ(f.faulty->held(), 0u);
}

// A message delayed past the timeout: the receiver gives up, and reset() discards the message
// so that it can never reach a later step.
TEST(FaultyTransport, ResetDiscardsAMessageDelayedPastTheTimeout) {
  Faulty f({parse_fault("delay:mb=0,ms=3600000")}, milliseconds(100));
  f.faulty->send(0, 1, key("h", 0), torch::ones({1}), nullptr);
  EXPECT_EQ(f.faulty->held(), 1u);
  EXPECT_THROW(f.faulty->recv(1, 0, key("h", 0), c10::kCPU), CommTimeout);
  f.faulty->abort("device 1 timed out");
  f.faulty->reset();
  EXPECT_EQ(f.faulty->held(), 0u);
  EXPECT_FALSE(f.inner->aborted()) << "reset() reaches the wrapped transport";
  EXPECT_EQ(f.inner->pending(), 0u);
}

// Corruptions announce the same bytes under another shape or dtype.
TEST(FaultyTransport, CorruptShapeAnnouncesTheElementsAsAFlatVector) {
  Faulty f({parse_fault("corrupt-shape:mb=0"), parse_fault("corrupt-shape:mb=1")},
           milliseconds(600'000));
  torch::Tensor matrix = torch::arange(6, torch::kFloat).reshape({2, 3});
  torch::Tensor vector = torch::arange(4, torch::kFloat);
  f.faulty->send(0, 1, key("h", 0), matrix, nullptr);
  f.faulty->send(0, 1, key("h", 1), vector, nullptr);
  torch::Tensor got = f.faulty->recv(1, 0, key("h", 0), c10::kCPU);
  EXPECT_EQ(got.sizes(), c10::IntArrayRef({6}));
  EXPECT_TRUE(torch::equal(got, matrix.flatten()));
  EXPECT_EQ(f.faulty->recv(1, 0, key("h", 1), c10::kCPU).sizes(), c10::IntArrayRef({4, 1}));
}

TEST(FaultyTransport, CorruptDtypeAnnouncesTheBytesAsAnotherDtypeOfTheirSize) {
  Faulty f({parse_fault("corrupt-dtype")}, milliseconds(600'000));
  torch::Tensor sent = torch::tensor({1.5f, -2.0f});
  f.faulty->send(0, 1, key("h", 0), sent, nullptr);
  torch::Tensor got = f.faulty->recv(1, 0, key("h", 0), c10::kCPU);
  EXPECT_EQ(got.scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(got.view(torch::kFloat), sent));
  EXPECT_EQ(with_wrong_dtype(torch::ones({1}, torch::kDouble)).scalar_type(), torch::kLong);
  EXPECT_EQ(with_wrong_dtype(torch::ones({1}, torch::kHalf)).scalar_type(), torch::kShort);
  EXPECT_EQ(with_wrong_dtype(torch::ones({1}, torch::kBFloat16)).scalar_type(), torch::kShort);
}

TEST(FaultyTransport, ThrowFailsTheSendNamingTheMessage) {
  Faulty f({parse_fault("throw:grad=1")}, milliseconds(600'000));
  f.faulty->send(0, 1, key("h", 0), torch::ones({1}), nullptr);
  try {
    f.faulty->send(1, 0, key("h", 0, /*gradient=*/true), torch::ones({1}), nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("injected fault (throw:grad=1): the send of {} from device 1 to device "
                          "0 failed",
                          key("h", 0, true).to_string()));
  }
  EXPECT_EQ(f.inner->pending(), 1u) << "the failed send delivered nothing";
}

}  // namespace
}  // namespace tandem::transport
