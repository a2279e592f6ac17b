// What the layer measurements (layer_bytes.cc, inference_plan.cc) share: the tracker bucket they
// charge and the bytes of a tensor's elements.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "tandem/memory/tracker.h"

namespace tandem::runtime {

// The tracker bucket a measurement charges; no pipeline device uses the last index.
constexpr int kProbeDevice = memory::Tracker::kMaxDevices - 1;

inline uint64_t tensor_bytes(const torch::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
}

}  // namespace tandem::runtime
