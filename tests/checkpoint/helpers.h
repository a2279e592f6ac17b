// Shared pieces of the checkpoint tests: a small MLP pipeline on synthetic data, a temporary
// folder, and bitwise comparison of parameters.
#pragma once

#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tandem/checkpoint/save.h"
#include "tandem/models/mlp.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::checkpoint::testing {

// A fresh folder under the system's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tandem-ckpt-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct Recipe {
  // Layers per stage of the 6: flatten, dense0, block0.dense0, block0.dense1, dropout, logits.
  std::vector<int> balance = {3, 3};
  double dropout = 0.3;
  uint64_t init_seed = 7;  // parameter initialization; a resumed pipeline uses another on purpose
  std::string optimizer = "adam";
  int64_t width = 16;
  int blocks = 1;
  int microbatches = 2;
};

inline graph::Model small_mlp(const Recipe& s) {
  torch::manual_seed(s.init_seed);
  models::MlpOptions o;
  o.inputs = 12;
  o.width = s.width;
  o.blocks = s.blocks;
  o.dropout = s.dropout;
  o.classes = 5;
  return models::mlp(o);
}

inline runtime::OptimizerFactory optimizer_factory(const std::string& kind) {
  if (kind == "sgd") {
    return [](std::vector<torch::Tensor> p) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05).momentum(0.9));
    };
  }
  return [](std::vector<torch::Tensor> p) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-2));
  };
}

// One cpu device per stage, one intra-op thread each, seed 5 for the dropout streams.
inline std::unique_ptr<runtime::Pipeline> make_pipeline(const Recipe& s,
                                                        bool with_optimizer = true) {
  graph::Model m = small_mlp(s);
  graph::Partition part = graph::partition_by_balance(m, s.balance);
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(s.balance.size()), 1);
  o.microbatches = s.microbatches;
  o.seed = 5;
  auto p = std::make_unique<runtime::Pipeline>(std::move(m), part, o);
  if (with_optimizer) p->set_optimizer(optimizer_factory(s.optimizer));
  return p;
}

// The batch of step `step`: 8 samples of 12 features and labels in [0, 5), the same whatever
// the run that asks for it.
inline std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(1000 + step);
  return {torch::randn({8, 12}, gen), torch::randint(5, {8}, gen)};
}

// Trains from pipeline.step() until `until` steps are done.
inline void train_until(runtime::Pipeline& p, int64_t until) {
  while (p.step() < until) {
    auto [x, y] = batch(p.step());
    p.forward_backward(x, y);
    p.optimizer_step();
  }
}

inline std::map<std::string, torch::Tensor> snapshot(const runtime::Pipeline& p) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : p.named_parameters()) out[name] = t.detach().cpu().clone();
  return out;
}

inline void expect_bitwise_equal(const std::map<std::string, torch::Tensor>& got,
                                 const std::map<std::string, torch::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(got.at(name), w))
        << name << " differs by " << (got.at(name) - w).abs().max().item<double>();
  }
}

inline SaveOptions keep(int k) {
  SaveOptions o;
  o.keep = k;
  return o;
}

// Substring check with the whole message on failure.
#define EXPECT_THROW_WITH(statement, ...)                                                   \
  do {                                                                                      \
    try {                                                                                   \
      statement;                                                                            \
      ADD_FAILURE() << "expected tandem::Error from " #statement;                           \
    } catch (const ::tandem::Error& e) {                                                    \
      const std::string msg = e.what();                                                     \
      for (const std::string part : {__VA_ARGS__}) {                                        \
        EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg; \
      }                                                                                     \
    }                                                                                       \
  } while (false)

}  // namespace tandem::checkpoint::testing
