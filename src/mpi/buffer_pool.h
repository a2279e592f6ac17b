// Host buffers for received messages that keep their pages between steps (an internal part of
// MpiTransport).
//
// A fresh large tensor costs the kernel's first-touch page faults on every receive: on this
// kind of machine about as long as moving the bytes. A pipeline receives the same shapes every
// step, so a freed buffer goes back to a free list of its byte size and the next receive of
// that size reuses it. Only buffers of at least kMinBytes are pooled; at most kKeepPerSize per
// size and kKeepTotal bytes in all are kept, the rest are freed.
//
// Thread-safety: take() and the tensors' deleters may run on any thread. The tensors keep the
// pool alive, so they may outlive the transport. Their bytes are not charged to a tandem
// device (as the progress thread's allocations never were: it has no device).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tandem::mpi {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr int64_t kMinBytes = int64_t{1} << 20;
  static constexpr size_t kKeepPerSize = 8;
  static constexpr int64_t kKeepTotal = int64_t{512} << 20;

  static std::shared_ptr<BufferPool> create();
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An uninitialized contiguous CPU tensor; pooled memory when it is large enough.
  torch::Tensor take(c10::IntArrayRef sizes, c10::ScalarType dtype);

  // Buffers waiting for reuse, and their bytes (for tests).
  size_t free_buffers() const;
  int64_t free_bytes() const;

 private:
  BufferPool() = default;
  void give_back(void* data, int64_t bytes);

  mutable std::mutex mu_;
  std::map<int64_t, std::vector<void*>> free_;  // by byte size
  int64_t free_bytes_ = 0;
};

}  // namespace tandem::mpi
