// A device's slab group: the N devices that hold the N slabs of the same samples for one stage
// of a spatial split (slab j on the group's device j), and how one slab reaches the others.
//
// Layers reach it through graph::current_call().group (null when samples are whole): halo
// exchanges (halo.h) and sums over the whole sample (group_sum.h). Their messages go through
// the transport like the pipeline's, keyed with the stage at both ends and the exchange's name
// as the tensor, so the same code runs in process, over MPI and on CUDA.
//
// A dry group (no transport) stands for a slab's neighbours while one process measures a
// slab's memory or time: halos are zeros and sums are the slab's own; it records its exchanges
// with the bytes it would send, for the time they would take.
//
// Ownership and threads: the runtime owns one group per device and sets it for every run
// (begin_run); the device's worker calls it in forwards, and autograd's threads may call it in
// backwards. send/recv are the transport's (thread-safe); exchanges() is guarded.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "tandem/spatial/slabs.h"
#include "tandem/transport/transport.h"

namespace tandem::spatial {

// One message exchange with the other slabs, for traces and reports.
struct Exchange {
  std::string kind;  // "halo", "halo grad", "sum" or "sum grad"
  int stage = 0;
  int microbatch = 0;
  double start_us = 0;  // since the run's origin
  double end_us = 0;
  int64_t bytes_sent = 0;
};

class Group {
 public:
  using Clock = std::chrono::steady_clock;

  // `devices[k]`: the transport's device that holds slab k of this group; `index`: this
  // device's slab; `device`: where received tensors go. `transport` null: a dry group.
  Group(transport::Transport* transport, std::vector<int> devices, int index, c10::Device device,
        SlabLayout layout);

  int size() const { return static_cast<int>(devices_.size()); }
  int index() const { return index_; }
  bool dry() const { return transport_ == nullptr; }
  const SlabLayout& layout() const { return layout_; }
  const Slab& slab() const { return layout_.slabs.at(index_); }
  c10::Device device() const { return device_; }

  // Sets the step and run that message keys carry (transport::MessageKey) and the origin of
  // the exchanges' times, and forgets the exchanges recorded so far. Worker thread, between
  // runs.
  void begin_run(int64_t step, int64_t run, Clock::time_point origin);

  // The key of exchange `name` of `stage`'s micro-batch `microbatch` in the current run.
  transport::MessageKey key(const std::string& name, int stage, int microbatch,
                            bool gradient) const;
  // Sends `tensor` (not modified afterwards) to slab `to`; nothing for a dry group.
  void send(int to, const transport::MessageKey& key, const torch::Tensor& tensor);
  // The message `key` from slab `from`, on this device. A dry group has no peers: never call.
  torch::Tensor recv(int from, const transport::MessageKey& key);

  // Bytes of halo planes this device's forward exchanges have received so far (zeros at the
  // volume's ends and in a dry group count too): what the layers held as halos. Worker thread.
  int64_t halo_bytes() const { return halo_bytes_; }
  void add_halo_bytes(int64_t bytes) { halo_bytes_ += bytes; }

  double now_us() const;
  void record(Exchange exchange);
  // The exchanges of the current run, in the order they ended.
  std::vector<Exchange> exchanges() const;

 private:
  transport::Transport* transport_;
  std::vector<int> devices_;
  int index_;
  c10::Device device_;
  SlabLayout layout_;
  int64_t step_ = 0;
  int64_t run_ = 0;
  Clock::time_point origin_ = Clock::now();
  int64_t halo_bytes_ = 0;
  mutable std::mutex mu_;
  std::vector<Exchange> exchanges_;  // guarded by mu_
};

}  // namespace tandem::spatial
