// Optimizer state by parameter name, so that it survives a change of partition.
//
// LibTorch keys an optimizer's per-parameter state by the parameter's TensorImpl, and its
// archive format (Optimizer::save) by the parameter's position in that one optimizer: neither
// survives moving a layer to another stage (another optimizer). Here each parameter's state is
// a set of named tensors, keyed by the parameter's "<layer>.<name>":
//   adam, adamw: step (0-dim int64), exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only)
//   sgd:         momentum_buffer (only with momentum, after the first step)
// A parameter the optimizer has not stepped yet has no state. Hyperparameters (lr, betas, ...)
// are not state: they come from the optimizer the caller builds.
#pragma once

#include <torch/optim/optimizer.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
using ParamState = std::map<std::string, torch::Tensor>;  // field -> tensor

// "adam", "adamw" or "sgd"; throws tandem::Error naming the supported ones otherwise.
std::string optimizer_kind(const torch::optim::Optimizer& optimizer);

// The state of each of `params` that has one, as CPU tensors that share nothing with the
// optimizer. Every parameter must be held by `optimizer`.
std::map<std::string, ParamState> export_state(const torch::optim::Optimizer& optimizer,
                                               const NamedTensors& params);

// Gives each of `params` the state named in `states` (moved to the parameter's device), or no
// state (as in a fresh optimizer) when it has no entry. Throws tandem::Error naming the
// parameter when a field is missing or its shape differs from the parameter's.
void import_state(torch::optim::Optimizer& optimizer, const NamedTensors& params,
                  const std::map<std::string, ParamState>& states);

}  // namespace tandem::checkpoint
