// Small volumetric models, data and one-device references for the models' tests.
//
// Shapes: B batch, C channels, S the volume side (D = H = W = S).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/model.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/models/unet3d.h"

namespace tandem::model_testing {

inline graph::Model small_unet(int levels, double dropout = 0.0, bool bce = false,
                               uint64_t seed = 5) {
  torch::manual_seed(seed);
  models::Unet3dOptions o;
  o.levels = levels;
  o.filters = 4;
  o.dropout = dropout;
  o.bce = bce;
  o.volume = 16;
  return models::unet3d(o);
}

inline graph::Model small_conv_stack(uint64_t seed = 6) {
  torch::manual_seed(seed);
  models::Conv3dStackOptions o;
  o.convs = 4;
  o.filters = 4;
  o.volume = 8;
  return models::conv3d_stack(o);
}

struct VolumeData {
  torch::Tensor input;   // [B,1,S,S,S]
  torch::Tensor target;  // [B,1,S,S,S]
};

// Segmentation data: noise in, blocky 0/1 masks (4^3 blocks set with probability 0.4) out.
inline VolumeData segmentation_data(int64_t batch, int64_t side, uint64_t seed = 3) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor input = torch::randn({batch, 1, side, side, side}, gen);
  torch::Tensor coarse =
      torch::rand({batch, 1, side / 4, side / 4, side / 4}, gen).lt(0.4).to(torch::kFloat32);
  torch::Tensor target =
      coarse.repeat_interleave(4, 2).repeat_interleave(4, 3).repeat_interleave(4, 4);
  return {input, target};
}

// Regression data: noise in, a real-valued field out.
inline VolumeData regression_data(int64_t batch, int64_t side, uint64_t seed = 4) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor input = torch::randn({batch, 1, side, side, side}, gen);
  return {input, torch::tanh(torch::randn({batch, 1, side, side, side}, gen))};
}

inline std::vector<DeviceSpec> cpu_devices(int n) { return parse_devices(std::to_string(n), 1); }

inline std::vector<std::pair<std::string, torch::Tensor>> all_parameters(const graph::Model& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& l : m.layers) {
    for (auto& p : graph::named_parameters(l)) out.push_back(p);
  }
  return out;
}

// The whole model on one device, no pipeline, with the call context the runtime would set
// for the micro-batch of step `step` whose first sample is `first_sample` of the step's batch
// (dropout masks are drawn per sample); `training` false: dropout off, as in evaluation.
inline torch::Tensor reference_forward(const graph::Model& m, const torch::Tensor& input,
                                       uint64_t seed = 0, int64_t step = 0,
                                       int64_t first_sample = 0, bool training = true) {
  std::map<std::string, torch::Tensor> env{{m.input, input}};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    graph::Tensors in;
    for (const auto& n : l.inputs) in.push_back(env.at(n));
    graph::CallContext ctx;
    ctx.seed = seed;
    ctx.step = step;
    ctx.layer = static_cast<int>(i);
    ctx.training = training;
    ctx.sample_offset = first_sample;
    graph::ScopedCall call(ctx);
    auto out = l.forward(in);
    for (size_t k = 0; k < out.size(); ++k) env[l.outputs[k]] = out[k];
  }
  return env.at(m.output);
}

// d(loss)/d(parameter) on one device with the masks of step 0 seeded `seed`. `slices` empty:
// the full batch in one call. Otherwise each slice [offset, size) runs on its own with the
// loss weighted by size / B, as the runtime's micro-batches do; every sample draws the same
// dropout mask either way.
inline std::map<std::string, torch::Tensor> reference_grads(
    graph::Model m, const VolumeData& d,
    const std::vector<std::pair<int64_t, int64_t>>& slices = {}, uint64_t seed = 0) {
  if (slices.empty()) {
    m.loss(reference_forward(m, d.input, seed), d.target).backward();
  } else {
    const double batch = static_cast<double>(d.input.size(0));
    for (auto [offset, size] : slices) {
      torch::Tensor out = reference_forward(m, d.input.narrow(0, offset, size), seed, 0, offset);
      (m.loss(out, d.target.narrow(0, offset, size)) * (size / batch)).backward();
    }
  }
  std::map<std::string, torch::Tensor> g;
  for (auto& [name, p] : all_parameters(m)) g[name] = p.grad().clone();
  return g;
}

// fp32 agreement of a gradient with its reference: see the tolerance note in
// volume_equivalence_test.cc. Returns the error relative to the reference's largest magnitude.
inline double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = want.abs().max().item<double>();
  const double diff = (got.cpu() - want).abs().max().item<double>();
  return diff / std::max(scale, 1e-30);
}

}  // namespace tandem::model_testing
