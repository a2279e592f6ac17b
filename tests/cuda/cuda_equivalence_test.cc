// Pipelines on a GPU against the same model on that GPU, one device, the full batch.
//
// Devices: "cuda:0" repeated 1, 2 and 4 times. The stages share one GPU but each device has its
// own stream, so every transfer between stages is a copy ordered by events across streams: a
// missing wait shows up here as a wrong gradient, where CPU devices would not notice.
//
// Every test skips when LibTorch sees no CUDA device, so this binary builds and passes on a
// CPU-only machine; scripts/gpu-check.sh builds it (-DTANDEM_CUDA_CHECK=ON) and runs it on the
// GPU machine. TANDEM_CUDA_TEST_DEVICE=cpu runs the same cases on cpu devices instead, to check
// the tests themselves where there is no GPU.
//
// TF32 is off for cuBLAS and cuDNN: it rounds the inputs of every product to a 10-bit mantissa
// (about 5e-4 relative), which would drown the reordering errors the tolerances below bound.
//
// Tolerance, MLP: fp32, 1e-5 of the reference tensor's largest magnitude plus 1e-7, as in
// tests/runtime/equivalence_test.cc. A pipelined weight gradient sums the batch's products per
// micro-batch and then over micro-batches; cuBLAS may also split a reduction (split-K)
// differently for a micro-batch's shape than for the full batch's. Both only reorder the same
// fp32 terms: with B <= 50 terms the error stays below B * 2^-24 ~ 3e-6 of the largest partial
// sum.
//
// Tolerance, 3D U-Net: 1e-4. cuDNN picks a convolution algorithm per shape, so micro-batches of
// 1-2 samples and the full batch of 6 may run different algorithms (implicit GEMM, Winograd,
// FFT), whose transforms round differently, not just in another order; the CPU bound of 3e-5
// (tests/models/volume_equivalence_test.cc) gets a factor 3 for that. A wrong or missing
// micro-batch moves a gradient by the order of 1/6, three orders of magnitude above.
//
// Each case prints its largest relative error, so the log shows how much room is left.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "../runtime/test_models.h"
#include "memory/cuda_stats.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/pipeline.h"

#if __has_include("tandem/models/unet3d.h") && __has_include("../models/volume_models.h")
#define TANDEM_CUDA_TEST_UNET 1
#include "../models/volume_models.h"
#else
#define TANDEM_CUDA_TEST_UNET 0
#endif

namespace tandem {
namespace {

constexpr double kMlpTol = 1e-5;
constexpr double kUnetTol = 1e-4;

// "cuda" (default) or "cpu", from TANDEM_CUDA_TEST_DEVICE.
bool on_cpu() {
  const char* v = std::getenv("TANDEM_CUDA_TEST_DEVICE");
  return v && std::string(v) == "cpu";
}

torch::Device reference_device() {
  return on_cpu() ? torch::Device(torch::kCPU) : torch::Device("cuda:0");
}

// `n` devices: cuda:0 n times, or n cpu devices with one thread each.
std::vector<DeviceSpec> devices(int n) {
  if (on_cpu()) return parse_devices(std::to_string(n), 1);
  std::string spec;
  for (int i = 0; i < n; ++i) spec += i ? ",cuda:0" : "cuda:0";
  return parse_devices(spec, 1);
}

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!on_cpu() && !torch::cuda::is_available()) {
      GTEST_SKIP()
          << "no CUDA device visible to LibTorch (torch::cuda::is_available() is false); "
             "these tests need a GPU (TANDEM_CUDA_TEST_DEVICE=cpu runs them on cpu devices)";
    }
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
};

// The largest |got - want| relative to want's largest magnitude; `got` may be on any device.
// Fails the test beyond `tol` (plus 1e-7 absolute, for gradients that are all ~0).
double check_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                   const std::string& what) {
  EXPECT_TRUE(got.defined()) << what << " has no gradient";
  if (!got.defined()) return 0;
  const double scale = want.abs().max().item<double>();
  const double diff = (got.detach().cpu() - want.cpu()).abs().max().item<double>();
  EXPECT_LE(diff, tol * scale + 1e-7)
      << what << " differs by " << diff << " (scale " << scale << ")";
  return diff / std::max(scale, 1e-30);
}

void move_to(const graph::Model& m, torch::Device device) {
  for (const auto& l : m.layers) {
    if (l.module) l.module->to(device);
  }
}

// ---- MLP ------------------------------------------------------------------------------------

struct MlpCase {
  int devices;
  std::string schedule;
  int microbatches;
  int batch;
};

// How gtest and ctest name a case's parameter (instead of its raw bytes).
void PrintTo(const MlpCase& c, std::ostream* os) {
  *os << fmt::format("{}, {} devices, {} micro-batches, batch {}", c.schedule, c.devices,
                     c.microbatches, c.batch);
}

std::string mlp_case_name(const ::testing::TestParamInfo<MlpCase>& info) {
  std::string s = info.param.schedule;
  for (char& ch : s) {
    if (ch == '-') ch = '_';
  }
  return fmt::format("{}_d{}_m{}_b{}", s, info.param.devices, info.param.microbatches,
                     info.param.batch);
}

class MlpOnGpu : public Cuda, public ::testing::WithParamInterface<MlpCase> {};

TEST_P(MlpOnGpu, GradientsMatchOneDeviceFullBatch) {
  const MlpCase c = GetParam();
  const torch::Device dev = reference_device();
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(3);
  const torch::Tensor input = torch::randn({c.batch, 12}, gen);
  const torch::Tensor target = torch::randint(5, {c.batch}, gen);

  // The reference: the whole model on the reference device, the full batch.
  graph::Model ref = testing::small_mlp();
  move_to(ref, dev);
  torch::Tensor ref_loss = ref.loss(testing::reference_forward(ref, input.to(dev)), target.to(dev));
  ref_loss.backward();
  std::map<std::string, torch::Tensor> want;
  for (auto& [name, p] : testing::all_parameters(ref)) want[name] = p.grad().cpu();

  runtime::PipelineOptions o;
  o.devices = devices(c.devices);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  graph::Model m = testing::small_mlp();
  graph::Partition part = graph::partition_by_parameters(m, c.devices);
  runtime::Pipeline p(std::move(m), part, o);
  const runtime::StepStats stats = p.forward_backward(input, target);
  EXPECT_NEAR(stats.loss, ref_loss.item<double>(), 1e-6);

  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), want.size());
  double worst = 0;
  for (auto& [name, t] : params) {
    EXPECT_EQ(t.device().type(), dev.type()) << name << " left its device";
    worst = std::max(worst, check_close(t.grad(), want.at(name), kMlpTol, name));
  }
  std::cout << "mlp: max relative gradient error " << worst << " (tolerance " << kMlpTol << ")\n";
}

std::vector<MlpCase> mlp_cases() {
  std::vector<MlpCase> cases;
  for (int d : {1, 2, 4}) {
    for (std::string s : {"gpipe", "1f1b", "zb-h1"}) {
      for (int m : {1, 4, 8}) cases.push_back({d, s, m, 48});
      cases.push_back({d, s, 8, 50});  // uneven: 7,7,6,6,6,6,6,6
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, MlpOnGpu, ::testing::ValuesIn(mlp_cases()), mlp_case_name);

// ---- 3D U-Net -------------------------------------------------------------------------------

#if TANDEM_CUDA_TEST_UNET
struct UnetCase {
  std::string schedule;
  int microbatches;
};

void PrintTo(const UnetCase& c, std::ostream* os) {
  *os << fmt::format("{}, {} micro-batches", c.schedule, c.microbatches);
}

class UnetOnGpu : public Cuda, public ::testing::WithParamInterface<UnetCase> {};

// 16^3 volumes, 4 filters, 2 levels (9 layers); encoder (enc0.conv0 .. bottom.conv1, 5 layers)
// on one device, decoder (up0 .. final, 4 layers) on the other: skip0 crosses between them.
TEST_P(UnetOnGpu, EncoderAndDecoderOnTwoDevicesMatchOneDevice) {
  const UnetCase c = GetParam();
  const torch::Device dev = reference_device();
  const model_testing::VolumeData d = model_testing::segmentation_data(6, 16);

  graph::Model ref = model_testing::small_unet(2);
  move_to(ref, dev);
  const model_testing::VolumeData on_dev{d.input.to(dev), d.target.to(dev)};
  const double want_loss =
      ref.loss(model_testing::reference_forward(ref, on_dev.input), on_dev.target).item<double>();
  auto want = model_testing::reference_grads(std::move(ref), on_dev);

  runtime::PipelineOptions o;
  o.devices = devices(2);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  graph::Model m = model_testing::small_unet(2);
  graph::Partition part = graph::partition_by_balance(m, {5, 4});
  runtime::Pipeline p(std::move(m), part, o);
  ASSERT_EQ(p.flow().outputs[0].size(), 2u)
      << "the encoder stage should send two tensors: bottom.conv1's output and skip0";
  const runtime::StepStats stats = p.forward_backward(d.input, d.target);
  EXPECT_NEAR(stats.loss, want_loss, 1e-5 * std::max(1.0, std::abs(want_loss)));

  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), want.size());
  double worst = 0;
  for (auto& [name, t] : params)
    worst = std::max(worst, check_close(t.grad(), want.at(name), kUnetTol, name));
  std::cout << "unet3d: max relative gradient error " << worst << " (tolerance " << kUnetTol
            << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Schedules, UnetOnGpu,
                         ::testing::Values(UnetCase{"gpipe", 1}, UnetCase{"1f1b", 2},
                                           UnetCase{"1f1b", 4}, UnetCase{"gpipe", 4}),
                         [](const ::testing::TestParamInfo<UnetCase>& info) {
                           return fmt::format("{}_m{}", info.param.schedule,
                                              info.param.microbatches);
                         });
#endif

// ---- Stream order with the caller -----------------------------------------------------------

// The caller makes the input on its own current stream right after slow work queued there
// (30 products of two n x n matrices, about 0.1 s on a GPU), and reads the gradients on that
// stream right after the step. The workers' streams must wait for the first and the caller's
// stream for the second; without the first wait the stages would copy the input before it is
// written. Each round scales the input, so a stale copy from the round before is wrong too.
TEST_F(Cuda, StepIsOrderedWithTheCallersStream) {
  const torch::Device dev = reference_device();
  const int64_t n = on_cpu() ? 128 : 4096;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(3);
  const torch::Tensor base = torch::randn({48, 12}, gen);
  const torch::Tensor target = torch::randint(5, {48}, gen);
  runtime::PipelineOptions o;
  o.devices = devices(2);
  o.schedule = "1f1b";
  o.microbatches = 4;
  graph::Model m = testing::small_mlp();
  graph::Partition part = graph::partition_by_parameters(m, 2);
  runtime::Pipeline p(std::move(m), part, o);
  for (int round = 1; round <= 2; ++round) {
    graph::Model ref = testing::small_mlp();
    move_to(ref, dev);
    const torch::Tensor scaled = base * round;
    torch::Tensor ref_loss =
        ref.loss(testing::reference_forward(ref, scaled.to(dev)), target.to(dev));
    ref_loss.backward();
    std::map<std::string, torch::Tensor> want;
    for (auto& [name, t] : testing::all_parameters(ref)) want[name] = t.grad().cpu();

    // Copies from host memory wait for the stream on the host, so they come first.
    const torch::Tensor scaled_on_dev = scaled.to(dev), target_on_dev = target.to(dev);
    torch::Tensor slow = torch::full({n, n}, 1.0 / static_cast<double>(n), dev);
    for (int i = 0; i < 30; ++i) slow = torch::mm(slow, slow);  // stays the all-1/n matrix
    const torch::Tensor input = scaled_on_dev + 0 * slow.sum();
    const runtime::StepStats stats = p.forward_backward(input, target_on_dev);
    EXPECT_NEAR(stats.loss, ref_loss.item<double>(), 1e-6) << "round " << round;
    for (auto& [name, t] : p.named_parameters())
      check_close(t.grad(), want.at(name), kMlpTol, fmt::format("round {}: {}", round, name));
  }
}

// ---- Memory budget --------------------------------------------------------------------------

// Sets the caching allocator of cuda:0 back to the whole GPU when the test ends, whatever the
// pipeline capped it to (the cap is per process and outlives the pipeline).
class UncapOnExit {
 public:
  ~UncapOnExit() {
    if (!on_cpu()) memory::cuda_set_memory_fraction(1.0, 0);
  }
};

// PipelineOptions::device_memory caps what the caching allocator may take on the GPU. The cap
// is per GPU, shared by the two devices on cuda:0. A micro-batch of 2,000,000 x 12 floats
// (96 MB) cannot be copied in under a 64 MiB cap, while the parameters (a few KiB) fit.
TEST_F(Cuda, DeviceMemoryCapsTheGpuAndTheStepReportsOutOfMemory) {
  if (!on_cpu() && !memory::cuda_stats_available()) {
    GTEST_SKIP() << "this build has no CUDA memory statistics (TANDEM_HAVE_CUDA is 0: the CUDA "
                    "runtime headers were not on the include path)";
  }
  UncapOnExit uncap;
  runtime::PipelineOptions o;
  o.devices = devices(2);
  o.schedule = "1f1b";
  o.microbatches = 2;
  o.device_memory = uint64_t{64} << 20;
  graph::Model m = testing::small_mlp();
  graph::Partition part = graph::partition_by_parameters(m, 2);
  runtime::Pipeline p(std::move(m), part, o);
  const int64_t batch = 4'000'000;
  const torch::Tensor input = torch::randn({batch, 12});
  const torch::Tensor target = torch::randint(5, {batch});
  try {
    p.forward_backward(input, target);
    ADD_FAILURE() << "a step needing far more than the 64 MiB budget succeeded";
  } catch (const runtime::StepError& e) {
    EXPECT_TRUE(e.out_of_memory)
        << "the step failed, but not as out of memory (StepError::out_of_memory is false; on "
           "CUDA the executor must also recognise LibTorch's c10::OutOfMemoryError): "
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
