// The benchmark models written as plain LibTorch code (torch::nn modules, one forward
// function), the way a user would write them without tandem, for the baselines that tandem's
// pipelines are timed against. Each registers its parameters in the order of tandem's layers
// (tandem::models::conv3d_stack, tandem::models::unet3d), so copy_parameters can give it the
// same weights and a run can check that both compute the same function.
#pragma once

#include <fmt/format.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "tandem/graph/model.h"

namespace tandem::bench {

inline torch::nn::Conv3d same_conv3d(int64_t in, int64_t out, int64_t kernel) {
  return torch::nn::Conv3d(torch::nn::Conv3dOptions(in, out, kernel).padding(kernel / 2));
}

// `convs` - 1 x Conv3D(filters, 3^3, same, relu) -> Conv3D(1, 3^3, same).
// [B,in_channels,D,H,W] -> [B,1,D,H,W].
class PlainConv3dStackImpl : public torch::nn::Module {
 public:
  PlainConv3dStackImpl(int convs, int64_t filters, int64_t in_channels = 1) {
    for (int i = 0; i < convs; ++i) {
      const bool last = i == convs - 1;
      convs_.push_back(
          register_module(fmt::format("conv{}", i),
                          same_conv3d(i == 0 ? in_channels : filters, last ? 1 : filters, 3)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < convs_.size(); ++i) {
      x = convs_[i]->forward(x);
      if (i + 1 < convs_.size()) x = torch::relu(x);
    }
    return x;
  }

 private:
  std::vector<torch::nn::Conv3d> convs_;
};
TORCH_MODULE(PlainConv3dStack);

// The 3D U-Net: per level l < L-1 two Conv3D(3^3, relu) whose output is kept as the skip,
// then MaxPool3D(2); two Conv3D at the bottom; per level on the way up Conv3DTranspose(2^3,
// stride 2), concatenation with the skip, two Conv3D; a final Conv3D(1^3) and sigmoid.
// Filters F * 2^l at level l. [B,in_channels,D,H,W] -> [B,1,D,H,W] probabilities.
class PlainUnet3dImpl : public torch::nn::Module {
 public:
  PlainUnet3dImpl(int levels, int64_t filters, int64_t in_channels = 1) {
    const int bottom = levels - 1;
    auto f = [&](int level) { return filters << level; };
    int64_t channels = in_channels;
    for (int l = 0; l < bottom; ++l) {
      down_.push_back(
          {register_module(fmt::format("enc{}_conv0", l), same_conv3d(channels, f(l), 3)),
           register_module(fmt::format("enc{}_conv1", l), same_conv3d(f(l), f(l), 3))});
      channels = f(l);
    }
    bottom_ = {register_module("bottom_conv0", same_conv3d(channels, f(bottom), 3)),
               register_module("bottom_conv1", same_conv3d(f(bottom), f(bottom), 3))};
    for (int l = bottom - 1; l >= 0; --l) {
      up_.push_back(
          register_module(fmt::format("up{}", l),
                          torch::nn::ConvTranspose3d(
                              torch::nn::ConvTranspose3dOptions(f(l + 1), f(l), 2).stride(2))));
      dec_.push_back(
          {register_module(fmt::format("dec{}_conv0", l), same_conv3d(2 * f(l), f(l), 3)),
           register_module(fmt::format("dec{}_conv1", l), same_conv3d(f(l), f(l), 3))});
    }
    final_ = register_module("final", same_conv3d(filters, 1, 1));
  }

  torch::Tensor forward(torch::Tensor x) {
    std::vector<torch::Tensor> skips;
    for (auto& [c0, c1] : down_) {
      x = torch::relu(c1->forward(torch::relu(c0->forward(x))));
      skips.push_back(x);
      x = torch::max_pool3d(x, 2);
    }
    x = torch::relu(bottom_.second->forward(torch::relu(bottom_.first->forward(x))));
    for (size_t i = 0; i < up_.size(); ++i) {
      const torch::Tensor& skip = skips[skips.size() - 1 - i];
      x = torch::cat({up_[i]->forward(x), skip}, 1);
      x = torch::relu(dec_[i].second->forward(torch::relu(dec_[i].first->forward(x))));
    }
    return torch::sigmoid(final_->forward(x));
  }

 private:
  using ConvPair = std::pair<torch::nn::Conv3d, torch::nn::Conv3d>;
  std::vector<ConvPair> down_, dec_;
  ConvPair bottom_{nullptr, nullptr};
  std::vector<torch::nn::ConvTranspose3d> up_;
  torch::nn::Conv3d final_{nullptr};
};
TORCH_MODULE(PlainUnet3d);

// Copies the parameters of tandem's `model` (layer order) into `net` (registration order).
// Throws std::runtime_error when the two do not pair up one to one with equal shapes.
inline void copy_parameters(const graph::Model& model, torch::nn::Module& net) {
  std::vector<torch::Tensor> from;
  for (const auto& layer : model.layers) {
    if (!layer.module) continue;
    for (const auto& p : layer.module->parameters()) from.push_back(p);
  }
  std::vector<torch::Tensor> to = net.parameters();
  if (from.size() != to.size()) {
    throw std::runtime_error(fmt::format("the plain model has {} parameter tensors and tandem's {}",
                                         to.size(), from.size()));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < to.size(); ++i) {
    if (from[i].sizes() != to[i].sizes()) {
      throw std::runtime_error(
          fmt::format("parameter {}: the plain model's has shape [{}], "
                      "tandem's [{}]",
                      i, fmt::join(to[i].sizes(), ","), fmt::join(from[i].sizes(), ",")));
    }
    to[i].copy_(from[i]);
  }
}

}  // namespace tandem::bench
