// The same training, run again, gives the same bits, also while other threads keep the cores
// busy: timing may change how fast a run goes, never what it computes.
//
// The runs use the pipeline's defaults: 4 devices with the default thread share of this
// machine's cores, 2 micro-batches (so that stages often compute alone, where a timing-driven
// thread count would differ most), Adam for a few steps (so that a difference in any product
// reaches the weights). The products are large enough for OpenBLAS to split them among
// threads. Registered under each OpenBLAS kernel family (tests/CMakeLists.txt):
// with Haswell or Zen kernels a product's last bits depend on its BLAS thread count, so cores
// lent while devices wait (--idle-cores lend, once the default) make these runs differ.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <thread>

#include "tandem/models/mlp.h"
#include "tandem/runtime/pipeline.h"

namespace tandem {
namespace {

using Params = std::map<std::string, torch::Tensor>;

Params train_once() {
  torch::manual_seed(3);
  models::MlpOptions mo;
  mo.inputs = 512;
  mo.width = 512;
  mo.blocks = 2;
  mo.classes = 10;
  mo.dropout = 0.2;
  graph::Model m = models::mlp(mo);
  runtime::PipelineOptions o;  // defaults, as `tandem train` has them
  o.devices = parse_devices("4");
  o.microbatches = 2;
  o.seed = 1;
  auto part = graph::partition_by_parameters(m, 4);
  runtime::Pipeline p(std::move(m), part, o);
  p.set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-3));
  });
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(4);
  for (int step = 0; step < 3; ++step) {
    torch::Tensor x = torch::randn({256, 512}, gen);
    torch::Tensor y = torch::randint(10, {256}, gen);
    p.forward_backward(x, y);
    p.optimizer_step();
  }
  Params out;
  for (auto& [name, t] : p.named_parameters()) out[name] = t.detach().clone();
  return out;
}

// Threads that keep `n` cores busy for their lifetime.
class BusyThreads {
 public:
  explicit BusyThreads(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
    }
  }
  ~BusyThreads() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(Determinism, RepeatedTrainingIsBitwiseEqualWhateverTheLoad) {
  const Params first = train_once();
  ASSERT_FALSE(first.empty());
  // Quiet, then with one and with two other threads computing: each run meets another timing.
  for (int busy : {0, 1, 2}) {
    BusyThreads load(busy);
    const Params again = train_once();
    for (auto& [name, t] : first) {
      EXPECT_TRUE(torch::equal(t, again.at(name)))
          << name << " differs from the first run's (" << busy << " busy threads); largest "
          << "difference " << (t - again.at(name)).abs().max().item<double>();
    }
  }
}

// ATen's thread count is per thread, and a thread takes the last count any thread set when it
// first computes: the thread that builds the pipeline (and then loads and standardizes the data)
// computes with the devices' count, not with whatever it had or the cores'.
TEST(Determinism, TheCallingThreadComputesWithTheDevicesCount) {
  const int before = at::get_num_threads();
  at::set_num_threads(3);
  {
    models::MlpOptions mo;
    mo.inputs = 8;
    mo.width = 8;
    graph::Model m = models::mlp(mo);
    runtime::PipelineOptions o;
    o.devices = parse_devices("2");  // one thread each, the default
    auto part = graph::partition_by_parameters(m, 2);
    runtime::Pipeline p(std::move(m), part, o);
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  at::set_num_threads(before);
}

}  // namespace
}  // namespace tandem
