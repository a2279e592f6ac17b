// A model whose last stage can be made to overflow on purpose, for the loss scaling's tests
// (tests/train/loss_scale_test.cc, tests/mpi/loss_scale_main.cc): input [B,8] -> dense -> gain
// -> logits, cross-entropy, with a source of fixed points. The gain layer multiplies by a weight
// w; while overflow_switch() is on, the gradient of w (and only of w: every other gradient,
// that of the gain's input included, stays finite) is multiplied by 1e38, which no loss scale
// keeps finite. Split as {1, 2} layers, the overflow is on stage 1 alone. With helpers to
// compare a trainer's weights bit for bit.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/module_layer.h"
#include "tandem/train/source.h"
#include "tandem/train/trainer.h"

namespace tandem::testing {

inline std::atomic<bool>& overflow_switch() {
  static std::atomic<bool> on{false};
  return on;
}

struct GainFunction : torch::autograd::Function<GainFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w) {
    ctx->save_for_backward({x, w});
    return x * w;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& g = grads[0];
    torch::Tensor gw = (g * saved[0]).sum(0);
    if (overflow_switch()) gw = gw * 1e38f;
    return {g * saved[1], gw};
  }
};

struct GainImpl : torch::nn::Cloneable<GainImpl> {
  explicit GainImpl(int64_t width) : width_(width) { reset(); }
  void reset() override { w = register_parameter("w", torch::ones({width_})); }
  torch::Tensor forward(torch::Tensor x) { return GainFunction::apply(x, w); }
  int64_t width_;
  torch::Tensor w;
};
TORCH_MODULE(Gain);

constexpr int64_t kOverflowFeatures = 8;

inline graph::Model overflow_model() {
  torch::manual_seed(5);
  graph::Model m;
  m.name = "overflow";
  m.layers.push_back(graph::make_layer(
      "dense", torch::nn::Linear(kOverflowFeatures, kOverflowFeatures), "input", "h0"));
  m.layers.push_back(graph::make_layer("gain", Gain(kOverflowFeatures), "h0", "h1"));
  m.layers.push_back(
      graph::make_layer("logits", torch::nn::Linear(kOverflowFeatures, 2), "h1", "output"));
  m.loss = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  m.metric = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return logits.argmax(1).eq(labels).sum().item<double>();
  };
  return m;
}

// Points labelled by the sign of their sum, the same in every process.
class OverflowSource : public train::Source {
 public:
  int64_t train_size() const override { return 64; }
  int64_t test_size() const override { return 8; }
  train::Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    return points(epoch * 1000 + begin, end - begin);
  }
  train::Batch test_batch(int64_t begin, int64_t end) const override {
    return points(100000 + begin, end - begin);
  }
  std::string describe() const override { return "overflow points"; }
  std::vector<int64_t> input_shape() const override { return {kOverflowFeatures}; }

 private:
  static train::Batch points(int64_t first, int64_t n) {
    const torch::Tensor i =
        torch::arange(first * kOverflowFeatures, (first + n) * kOverflowFeatures, torch::kDouble)
            .reshape({n, kOverflowFeatures});
    const torch::Tensor x = torch::sin(0.37 * i + 0.2).to(torch::kFloat);
    return {x, (x.sum(1) > 0).to(torch::kInt64)};
  }
};

// A copy of the weights `t`'s process holds, by name.
inline std::map<std::string, torch::Tensor> weights_of(const train::Trainer& t) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, p] : t.pipeline().named_parameters()) out[name] = p.detach().clone();
  return out;
}

// Whether `a` and `b` hold the same names with the same bits.
inline bool same_bits(const std::map<std::string, torch::Tensor>& a,
                      const std::map<std::string, torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.count(name) || !torch::equal(t, b.at(name))) return false;
  return true;
}

}  // namespace tandem::testing
