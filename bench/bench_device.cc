// Training throughput and peak memory on one device, a GPU (cuda:N) or the CPU: a plain
// LibTorch loop over torch::nn modules (bench/plain_models.h) against tandem pipelines whose
// stages all share that device, for conv3d-stack and unet3d. It needs no Google Benchmark, so
// scripts/gpu-check.sh builds and runs it on the GPU machine.
//
// Same function: before timing, every tandem pipeline evaluates the batch with the plain
// model's initial weights and the two losses must agree to a relative 1e-4 (on CUDA with TF32
// off for that check only), else the program exits 1. The ratio then compares two programs
// that compute the same thing.
// Timing: runs in turn (plain, then each tandem configuration), `--repeats` times; each builds its
// model, takes one warm-up step, then times `--steps` steps (forward, backward, Adam) and
// waits for the device before reading the clock. Medians are reported.
// Peak memory: over one more step after each timed run (from its start to the end of the
// optimizer step); on CUDA the caching allocator's peak of allocated bytes (one number per
// GPU: stages that share it share it), on CPU tandem's allocation accounting per device.
//
// Usage: bench_device --model conv3d-stack|unet3d [--device cpu|cuda:N] [--stages 2,4]
//                     [--spatial 1,2]
//                     [--microbatches 4,8] ...
//        (bench_device --help lists the options)
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "memory/cpu_allocator.h"
#include "memory/cuda_stats.h"
#include "plain_models.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/graph/precision.h"
#include "tandem/memory/tracker.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/models/unet3d.h"
#include "tandem/runtime/pipeline.h"

namespace {

using namespace tandem::bench;

struct Options {
  std::string model = "conv3d-stack";
  std::string device = "cpu";
  std::vector<int> stages{2, 4};
  std::vector<int> spatial{1};    // slabs per sample (--spatial): devices per stage
  std::vector<int> microbatches;  // empty: twice the stages; counts above the batch are skipped
  std::string schedule = "1f1b";
  std::string partition = "flops";
  int convs = 4;
  int levels = 3;
  int64_t filters = 16;
  int64_t volume = 32;
  int64_t batch = 8;
  int steps = 5;
  int repeats = 3;
  std::string precision = "fp32";  // the forwards' type: fp32 | bf16 | fp16, both sides alike
  int threads_per_device = 1;      // CPU: each tandem device's threads (the plain loop: every core)
};

// The type the forwards compute in: the plain loop under LibTorch's autocast to it, tandem with
// PipelineOptions::precision.
c10::ScalarType compute_type(const Options& o) {
  if (o.precision == "bf16") return c10::kBFloat16;
  if (o.precision == "fp16") return c10::kHalf;
  return c10::kFloat;
}

// The tracker's device for the plain loop's CPU allocations (tandem's devices count from 0).
constexpr int kPlainAccount = tandem::memory::Tracker::kMaxDevices - 1;
constexpr double kCheckTolerance = 1e-4;

tandem::graph::Model make_model(const Options& o) {
  torch::manual_seed(0);
  if (o.model == "unet3d") {
    tandem::models::Unet3dOptions u;
    u.levels = o.levels;
    u.filters = o.filters;
    u.volume = o.volume;
    return tandem::models::unet3d(u);
  }
  tandem::models::Conv3dStackOptions c;
  c.convs = o.convs;
  c.filters = o.filters;
  c.volume = o.volume;
  return tandem::models::conv3d_stack(c);
}

// The plain model with tandem's initial weights, on `device`.
std::shared_ptr<torch::nn::Module> make_plain(const Options& o, const tandem::graph::Model& m,
                                              const c10::Device& device) {
  std::shared_ptr<torch::nn::Module> net;
  if (o.model == "unet3d") {
    net = PlainUnet3d(o.levels, o.filters).ptr();
  } else {
    net = PlainConv3dStack(o.convs, o.filters).ptr();
  }
  copy_parameters(m, *net);
  net->to(device);
  return net;
}

torch::Tensor plain_forward(const Options& o, torch::nn::Module& net, const torch::Tensor& x) {
  if (o.model == "unet3d") return static_cast<PlainUnet3dImpl&>(net).forward(x);
  return static_cast<PlainConv3dStackImpl&>(net).forward(x);
}

// One tandem configuration to time.
struct Variant {
  int stages;
  int microbatches;
  int slabs = 1;  // a group of this many devices per stage, one depth slab each
};

// Every stage count with every micro-batch count (twice the stages when none are given) that
// the batch can fill.
std::vector<Variant> variants(const Options& o) {
  std::vector<Variant> out;
  for (int n : o.spatial) {
    for (int s : o.stages) {
      if (o.microbatches.empty()) {
        out.push_back({s, static_cast<int>(std::min<int64_t>(2 * s, o.batch)), n});
        continue;
      }
      for (int m : o.microbatches)
        if (m <= o.batch) out.push_back({s, m, n});
    }
  }
  TANDEM_CHECK(!out.empty(), "no micro-batch count given fits a batch of {}", o.batch);
  return out;
}

tandem::graph::Partition partition_for(const Options& o, const tandem::graph::Model& m,
                                       int stages) {
  if (o.partition == "parameters") return tandem::graph::partition_by_parameters(m, stages);
  return tandem::graph::partition_by_cost(m, stages, [&m](int, int begin, int end) {
    double flops = 0;
    for (int i = begin; i < end; ++i) flops += m.layers[i].forward_flops_per_sample;
    return flops;
  });
}

// The device every run uses, and how to wait for it.
struct Target {
  c10::Device device{c10::kCPU};
  bool cuda() const { return device.is_cuda(); }
  void sync() const {
    if (cuda()) torch::cuda::synchronize(device.index());
  }
  // tandem's --devices for `stages` stages sharing this device.
  std::string devices(int stages) const {
    if (!cuda()) return std::to_string(stages);
    std::string s;
    for (int i = 0; i < stages; ++i) s += (i ? "," : "") + device.str();
    return s;
  }
};

// One timed run: samples/s and the peak bytes of one more step, per device name.
struct Run {
  double samples_per_s = 0;
  std::map<std::string, uint64_t> peak;
};

// Times `step` (warm-up, then o.steps steps, waiting for the device), then measures the peak
// of one more step: `reset` starts the peak, `read` returns it per device.
Run time_and_measure(const Options& o, const Target& t, const std::function<void()>& step,
                     const std::function<void()>& reset,
                     const std::function<std::map<std::string, uint64_t>()>& read) {
  Run r;
  step();  // warm-up
  t.sync();
  const auto t0 = Clock::now();
  for (int s = 0; s < o.steps; ++s) step();
  t.sync();
  r.samples_per_s = static_cast<double>(o.steps * o.batch) / seconds_since(t0);
  reset();
  step();
  t.sync();
  r.peak = read();
  return r;
}

Run plain_run(const Options& o, const Target& t, const torch::Tensor& x, const torch::Tensor& y) {
  const int cores = tandem::available_cores();
  return on_own_thread([&] {
    if (!t.cuda()) set_threads(cores);
    tandem::memory::ScopedWhere where(kPlainAccount, "plain");
    const tandem::graph::Model m = make_model(o);
    auto net = make_plain(o, m, t.device);
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-4));
    auto step = [&] {
      opt.zero_grad();
      torch::Tensor out;
      {
        tandem::graph::ScopedAutocast autocast(t.device, compute_type(o));
        out = plain_forward(o, *net, x);
      }
      // The loss in fp32, as tandem computes it.
      m.loss(out.to(torch::kFloat), y).backward();
      opt.step();
    };
    auto reset = [&] {
      if (t.cuda()) {
        tandem::memory::cuda_reset_peak(t.device.index());
      } else {
        tandem::memory::Tracker::global().reset_peak(kPlainAccount);
      }
    };
    auto read = [&]() -> std::map<std::string, uint64_t> {
      if (t.cuda())
        return {{t.device.str(), tandem::memory::cuda_device_stats(t.device.index()).peak}};
      return {{"cpu", tandem::memory::Tracker::global().peak(kPlainAccount)}};
    };
    return time_and_measure(o, t, step, reset, read);
  });
}

std::unique_ptr<tandem::runtime::Pipeline> make_pipeline(const Options& o, const Target& t,
                                                         const Variant& v,
                                                         c10::ScalarType precision) {
  tandem::graph::Model m = make_model(o);
  tandem::runtime::PipelineOptions po;
  po.devices = tandem::parse_devices(t.devices(v.stages * v.slabs), o.threads_per_device);
  po.schedule = o.schedule;
  po.microbatches = v.microbatches;
  po.slabs = v.slabs;
  po.precision = precision;
  if (v.slabs > 1) po.slab_extent = o.volume;
  auto part = partition_for(o, m, v.stages);
  auto p = std::make_unique<tandem::runtime::Pipeline>(std::move(m), part, po);
  p->set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-4));
  });
  return p;
}

Run tandem_run(const Options& o, const Target& t, const Variant& v, const torch::Tensor& x,
               const torch::Tensor& y) {
  auto p = make_pipeline(o, t, v, compute_type(o));
  auto step = [&] {
    p->forward_backward(x, y);
    p->optimizer_step();
  };
  // The pipeline starts every device's peak at the start of each step.
  auto read = [&] {
    std::map<std::string, uint64_t> peak;
    for (size_t d = 0; d < p->devices().size(); ++d) {
      const std::string& name = p->devices()[d].name;
      peak[name] = std::max(peak[name], p->device_peak_bytes(static_cast<int>(d)));
    }
    return peak;
  };
  return time_and_measure(
      o, t, step, [] {}, read);
}

// The loss of the initial weights on (x, y): the plain model's, and each pipeline's.
// Returns false (after printing why) when one differs by more than kCheckTolerance.
bool check_same_function(const Options& o, const Target& t, const torch::Tensor& x,
                         const torch::Tensor& y) {
  auto& ctx = at::globalContext();
  const bool cudnn_tf32 = ctx.allowTF32CuDNN(), cublas_tf32 = ctx.allowTF32CuBLAS();
  ctx.setAllowTF32CuDNN(false);
  ctx.setAllowTF32CuBLAS(false);
  double plain = 0;
  {
    torch::NoGradGuard no_grad;
    const tandem::graph::Model m = make_model(o);
    auto net = make_plain(o, m, t.device);
    plain = m.loss(plain_forward(o, *net, x), y).item<double>();
  }
  bool ok = std::isfinite(plain);
  std::string line =
      fmt::format("# same function: loss at the initial weights, plain {:.6f}", plain);
  for (const Variant& v : variants(o)) {
    // In fp32 whatever --precision: the same model, compared to fp32's rounding.
    const double loss = make_pipeline(o, t, v, c10::kFloat)->evaluate(x, y).loss;
    const double rel = std::abs(loss - plain) / std::max(std::abs(plain), 1e-12);
    ok = ok && rel <= kCheckTolerance;
    line += fmt::format(
        ", tandem {} stages{} x {} micro-batches {:.6f} (relative difference {:.1e})", v.stages,
        v.slabs > 1 ? fmt::format(" of {} slabs", v.slabs) : "", v.microbatches, loss, rel);
  }
  ctx.setAllowTF32CuDNN(cudnn_tf32);
  ctx.setAllowTF32CuBLAS(cublas_tf32);
  std::printf("%s; tolerance %.0e, TF32 off for this check: %s\n", line.c_str(), kCheckTolerance,
              ok ? "ok" : "FAILED");
  return ok;
}

std::string peak_text(const std::vector<Run>& runs) {
  std::string s;
  if (runs.empty()) return s;
  for (const auto& [name, bytes] : runs.front().peak) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(static_cast<double>(r.peak.at(name)));
    s += fmt::format("{}{} {:.1f} MiB", s.empty() ? "" : ", ", name,
                     summarize(v).median / (1024.0 * 1024.0));
  }
  return s;
}

std::string describe(const Options& o) {
  if (o.model == "unet3d") {
    return fmt::format("unet3d ({} levels, {} filters, {})", o.levels, o.filters, o.precision);
  }
  return fmt::format("conv3d-stack ({} convs, {} filters, {})", o.convs, o.filters, o.precision);
}

int run(const Options& o) {
  const bool cuda = o.device.rfind("cuda:", 0) == 0;
  TANDEM_CHECK(
      o.device == "cpu" || (cuda && o.device.size() > 5 &&
                            o.device.find_first_not_of("0123456789", 5) == std::string::npos),
      "--device is cpu or cuda:N, not '{}'", o.device);
  Target t;
  t.device = c10::Device(o.device);
  std::string about;
  if (cuda) {
    TANDEM_CHECK(tandem::memory::cuda_stats_available(),
                 "--device {}: this build has no CUDA, or no CUDA device is visible", o.device);
    TANDEM_CHECK(static_cast<size_t>(t.device.index()) < torch::cuda::device_count(),
                 "--device {}: {} CUDA devices are visible", o.device, torch::cuda::device_count());
    about = fmt::format("{:.1f} GiB; TF32 in cuDNN convolutions: {}",
                        static_cast<double>(tandem::memory::cuda_total_bytes(t.device.index())) /
                            (1024.0 * 1024.0 * 1024.0),
                        at::globalContext().allowTF32CuDNN() ? "on" : "off");
  } else {
    tandem::memory::install_cpu_accounting();
    about = fmt::format("{} cores", tandem::available_cores());
  }
  torch::manual_seed(1);
  const int64_t s = o.volume;
  const auto opts = torch::TensorOptions().device(t.device);
  torch::Tensor x = torch::randn({o.batch, 1, s, s, s}).to(t.device);
  torch::Tensor y = o.model == "unet3d"
                        ? torch::rand({o.batch, 1, s, s, s}).gt(0.7).to(opts.dtype(torch::kFloat))
                        : torch::randn({o.batch, 1, s, s, s}).to(t.device);
  const tandem::graph::Model m = make_model(o);
  const double flops = train_flops_per_sample(m);
  std::printf(
      "# bench_device: %s, %lld^3 volume, batch %lld, on %s (%s); %s, partition by %s; %d "
      "steps per run, %d runs in turn; training FLOPs per sample (3x forward): %.2f G\n",
      describe(o).c_str(), static_cast<long long>(s), static_cast<long long>(o.batch),
      o.device.c_str(), about.c_str(), o.schedule.c_str(), o.partition.c_str(), o.steps, o.repeats,
      flops / 1e9);
  std::fflush(stdout);
  if (!check_same_function(o, t, x, y)) return 1;

  std::vector<Run> plain;
  const std::vector<Variant> vs = variants(o);
  std::vector<std::vector<Run>> piped(vs.size());
  for (int r = 0; r < o.repeats; ++r) {
    plain.push_back(plain_run(o, t, x, y));
    for (size_t i = 0; i < vs.size(); ++i) piped[i].push_back(tandem_run(o, t, vs[i], x, y));
  }
  auto rates = [](const std::vector<Run>& runs) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.samples_per_s);
    return summarize(v);
  };
  const Stats base = rates(plain);
  std::printf(
      "\n| run | samples/s median | min-max | ratio to plain loop | GFLOP/s | peak memory "
      "(median) |\n|---|---|---|---|---|---|\n");
  auto row = [&](const std::string& name, const std::vector<Run>& runs) {
    const Stats st = rates(runs);
    std::printf("| %s | %.2f | %.2f-%.2f | %.3f | %.1f | %s |\n", name.c_str(), st.median, st.min,
                st.max, st.median / base.median, st.median * flops / 1e9, peak_text(runs).c_str());
  };
  row(fmt::format("plain LibTorch loop (torch::nn modules) on {}", o.device), plain);
  for (size_t i = 0; i < vs.size(); ++i) {
    row(fmt::format("tandem {} {} stages{} on {}, {} micro-batches, layers per stage {}",
                    o.schedule, vs[i].stages,
                    vs[i].slabs > 1 ? fmt::format(" x {} slabs (--spatial)", vs[i].slabs) : "",
                    o.device, vs[i].microbatches,
                    balance_text(partition_for(o, m, vs[i].stages).balance())),
        piped[i]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Training throughput and peak memory on one device: a plain LibTorch loop "
      "against tandem pipelines whose stages share that device."};
  app.add_option("--model", o.model, "conv3d-stack | unet3d")
      ->capture_default_str()
      ->check(CLI::IsMember({"conv3d-stack", "unet3d"}));
  app.add_option("--device", o.device, "cpu | cuda:N")->capture_default_str();
  app.add_option("--stages", o.stages, "stage counts to time, e.g. 2,4")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--spatial", o.spatial,
                 "slab counts to time with each stage count, e.g. 1,2: every stage on a group of "
                 "that many devices, each holding one depth slab of every sample")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--microbatches", o.microbatches,
                 "micro-batch counts to time with each stage count, e.g. 4,8 (default: twice "
                 "the stages)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--schedule", o.schedule, "tandem's schedule")->capture_default_str();
  app.add_option("--partition", o.partition, "flops | parameters: what stages balance")
      ->capture_default_str()
      ->check(CLI::IsMember({"flops", "parameters"}));
  app.add_option("--convs", o.convs, "conv3d-stack: convolutions")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--levels", o.levels, "unet3d: resolution levels")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--filters", o.filters, "filters (unet3d: at the top level)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--volume", o.volume, "side S of the S^3 volumes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--batch", o.batch, "samples per step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--steps", o.steps, "timed steps per run")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--precision", o.precision,
                 "fp32 | bf16 | fp16: the forwards' type, the plain loop under LibTorch's autocast "
                 "(the same-function check stays fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--threads-per-device", o.threads_per_device,
                 "CPU: threads of each tandem device (the plain loop takes every core): give the "
                 "cores over the devices to compare one device with the plain loop on the same "
                 "cores")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs of each variant, in turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bench_device: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_device: %s\n", e.what());
    return 1;
  }
}
