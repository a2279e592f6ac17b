// Where each layer's forward and backward actually ran, recorded from execution (not from the
// plan): the forward from the device of the layer's output tensors on a GPU (on the CPU, whose
// tensors do not say which of a process's CPU devices made them, the worker that called the
// layer); the backward by a probe in the autograd graph on the layer's outputs, from the
// gradient's device on a GPU (on the CPU, the worker thread that ran it). This is how a user
// checks that the backward runs on every device.
//
// Thread-safety: record_* may be called from any thread.
#pragma once

#include <torch/types.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tandem::runtime {

class PlacementLog {
 public:
  void record_forward(int layer, const std::string& device);
  void record_backward(int layer, const std::string& device);
  // Per layer index: the devices its forward and its backward ran on.
  std::map<int, std::set<std::string>> forward() const;
  std::map<int, std::set<std::string>> backward() const;

  // Returns `t` unchanged; its backward records `layer` into this log.
  torch::Tensor probe(const torch::Tensor& t, int layer);

 private:
  mutable std::mutex mu_;
  std::map<int, std::set<std::string>> forward_, backward_;
};

}  // namespace tandem::runtime
