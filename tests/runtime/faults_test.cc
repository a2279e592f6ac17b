// One fault in one message ends the step on every device, with an error that names the device,
// stage, action and micro-batch where it was noticed; after reset() the next step is exact.
//
// Set-up: the small MLP on 2 CPU devices (balance 3,3), GPipe, 2 micro-batches of 4 samples.
// Device 1 receives both forwards before it sends any gradient and receives nothing after, so
// a lost gradient leaves device 0 the only device waiting: the device that fails first is
// known for every case. Under MPI the same faults end the job (tests/mpi/faults.cmake).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/runtime/pipeline.h"
#include "tandem/transport/faulty.h"
#include "tandem/transport/inprocess.h"
#include "test_models.h"

namespace tandem {
namespace {

using std::chrono::milliseconds;

struct Case {
  std::string fault;
  // Long enough that every message that is sent arrives well within it, however loaded the
  // machine: the only timeouts are those of lost messages (the steps here take milliseconds).
  milliseconds timeout;
  int device;  // where the failure is noticed; its stage has the same index
  std::string action;
  int microbatch;
  std::string cause;  // the start of what went wrong, after the place
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.fault; }

torch::Tensor inputs() {
  return torch::randn({8, 12}, torch::make_generator<at::CPUGeneratorImpl>(5));
}
torch::Tensor labels() {
  return torch::randint(5, {8}, torch::make_generator<at::CPUGeneratorImpl>(6));
}

runtime::PipelineOptions options(milliseconds timeout) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.schedule = "gpipe";
  o.microbatches = 2;
  o.comm_timeout = timeout;
  o.lend_idle_cores = false;  // one BLAS thread per device: bitwise repeatable gradients
  return o;
}

std::map<std::string, torch::Tensor> gradients(const runtime::Pipeline& p) {
  std::map<std::string, torch::Tensor> g;
  for (const auto& [name, t] : p.named_parameters()) g[name] = t.grad().clone();
  return g;
}

class Faults : public ::testing::TestWithParam<Case> {};

TEST_P(Faults, EndTheStepOnEveryDeviceAndTheNextStepIsExact) {
  const Case& c = GetParam();
  std::shared_ptr<transport::InProcessTransport> inner;
  std::shared_ptr<transport::FaultyTransport> faulty;
  runtime::PipelineOptions o = options(c.timeout);
  o.wrap_transport = [&](std::shared_ptr<transport::Transport> t) {
    inner = std::dynamic_pointer_cast<transport::InProcessTransport>(t);
    faulty = std::make_shared<transport::FaultyTransport>(
        t, std::vector<transport::Fault>{transport::parse_fault(c.fault)});
    return faulty;
  };
  graph::Model m = testing::small_mlp();
  auto part = graph::partition_by_balance(m, {3, 3});
  runtime::Pipeline p(std::move(m), part, o);
  ASSERT_TRUE(inner) << "the pipeline builds an in-process transport";

  // forward_backward returns only once every device's worker has stopped.
  try {
    p.forward_backward(inputs(), labels());
    FAIL() << "the step survived " << c.fault;
  } catch (const runtime::StepError& e) {
    EXPECT_EQ(e.device, c.device);
    EXPECT_EQ(e.stage, c.device);
    EXPECT_EQ(e.action, c.action);
    EXPECT_EQ(e.microbatch, c.microbatch);
    const std::string want =
        fmt::format("step 0 failed on device {} (cpu:{}), stage {}, action {} (micro-batch {}): {}",
                    c.device, c.device, c.device, c.action, c.microbatch, c.cause);
    EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
  }
  EXPECT_EQ(faulty->fired(0), 1);
  EXPECT_EQ(faulty->held(), 0u) << "a delayed message outlived the step";
  EXPECT_FALSE(inner->aborted()) << "the pipeline did not reset its transport";
  EXPECT_EQ(inner->pending(), 0u) << "messages of the failed step are left";

  // The next step, on the same batch, gives the gradients of a pipeline that never failed.
  p.forward_backward(inputs(), labels());
  graph::Model clean_model = testing::small_mlp();
  runtime::Pipeline clean(std::move(clean_model), part, options(c.timeout));
  clean.forward_backward(inputs(), labels());
  const auto want = gradients(clean);
  for (const auto& [name, g] : gradients(p)) EXPECT_TRUE(torch::equal(g, want.at(name))) << name;
  EXPECT_EQ(inner->pending(), 0u);
}

const milliseconds kLost{2000};      // waited out by device 0 in the cases that lose a message
const milliseconds kNever{600'000};  // never waited out

INSTANTIATE_TEST_SUITE_P(
    InProcess, Faults,
    ::testing::Values(
        // A lost gradient: device 0 waits for it until the timeout.
        Case{"drop:grad=1,mb=0", kLost, 0, "0B0<1", 0, "device 0 waited 2.0 s for '"},
        // One that comes too late: the same, and reset() discards it when it is still held.
        Case{"delay:grad=1,mb=1,ms=3600000", kLost, 0, "0B1<1", 1, "device 0 waited 2.0 s for '"},
        // A send that fails, on the sender.
        Case{"throw:grad=0,mb=1", kNever, 0, "0F1>1", 1,
             "injected fault (throw:mb=1,grad=0): the send of '"},
        // An activation announced as int32: only floating tensors are sent.
        Case{"corrupt-dtype:grad=0,mb=0", kNever, 1, "1F0<0", 0, "the activation 'h0_0' from stage 0 arrived with dtype Int"},
        // An activation of the wrong shape: the first layer that reads it refuses it.
        Case{"corrupt-shape:grad=0,mb=1", kNever, 1, "1F1", 1, ""},
        // Gradients of the wrong dtype or shape: checked against the tensor they belong to
        // (autograd would convert the dtype silently).
        Case{"corrupt-dtype:grad=1,mb=0", kNever, 0, "0B0", 0, "the gradient of '"},
        Case{"corrupt-shape:grad=1,mb=1", kNever, 0, "0B1", 1, "the gradient of '"}));

}  // namespace
}  // namespace tandem
