#include "mpi/buffer_pool.h"

#include <cstdlib>
#include <new>

#include "tandem/common/check.h"

namespace tandem::mpi {
namespace {
constexpr size_t kAlignment = 64;  // as LibTorch's CPU allocator
}  // namespace

std::shared_ptr<BufferPool> BufferPool::create() {
  return std::shared_ptr<BufferPool>(new BufferPool());
}

BufferPool::~BufferPool() {
  for (auto& [bytes, blocks] : free_)
    for (void* p : blocks) std::free(p);
}

torch::Tensor BufferPool::take(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  const int64_t bytes = count * static_cast<int64_t>(c10::elementSize(dtype));
  const auto options = torch::TensorOptions().dtype(dtype);
  if (bytes < kMinBytes) return torch::empty(sizes, options);
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      data = it->second.back();
      it->second.pop_back();
      free_bytes_ -= bytes;
    }
  }
  if (data == nullptr) {
    data = std::aligned_alloc(
        kAlignment, (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment);
    if (data == nullptr) throw std::bad_alloc();
  }
  std::shared_ptr<BufferPool> self = shared_from_this();
  return torch::from_blob(
      data, sizes, [self, bytes](void* p) { self->give_back(p, bytes); }, options);
}

void BufferPool::give_back(void* data, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& blocks = free_[bytes];
    if (blocks.size() < kKeepPerSize && free_bytes_ + bytes <= kKeepTotal) {
      blocks.push_back(data);
      free_bytes_ += bytes;
      return;
    }
  }
  std::free(data);
}

size_t BufferPool::free_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [bytes, blocks] : free_) n += blocks.size();
  return n;
}

int64_t BufferPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_bytes_;
}

}  // namespace tandem::mpi
