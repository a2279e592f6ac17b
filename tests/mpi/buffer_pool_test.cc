// The receive buffer pool: large buffers come back for reuse when their tensors die, small
// ones are plain tensors, and the pool keeps no more than its limits.
#include "mpi/buffer_pool.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace tandem::mpi {
namespace {

TEST(BufferPool, ALargeBufferIsReusedAfterItsTensorDies) {
  auto pool = BufferPool::create();
  const int64_t n = BufferPool::kMinBytes / 4;  // floats
  void* first = nullptr;
  {
    torch::Tensor a = pool->take({n}, torch::kFloat);
    a.fill_(1.5f);
    first = a.data_ptr();
    EXPECT_EQ(pool->free_buffers(), 0u);
  }
  EXPECT_EQ(pool->free_buffers(), 1u);
  EXPECT_EQ(pool->free_bytes(), BufferPool::kMinBytes);
  torch::Tensor b = pool->take({2, n / 2}, torch::kFloat);  // same bytes, another shape
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{2, n / 2}));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(pool->free_buffers(), 0u);
  // Another size is a new buffer.
  torch::Tensor c = pool->take({n + 16}, torch::kFloat);
  EXPECT_NE(c.data_ptr(), first);
}

TEST(BufferPool, SmallBuffersAreNotPooledAndLimitsHold) {
  auto pool = BufferPool::create();
  { torch::Tensor small = pool->take({16}, torch::kLong); }
  EXPECT_EQ(pool->free_buffers(), 0u);
  {
    std::vector<torch::Tensor> many;
    for (size_t i = 0; i < BufferPool::kKeepPerSize + 3; ++i)
      many.push_back(pool->take({BufferPool::kMinBytes}, torch::kByte));
  }
  EXPECT_EQ(pool->free_buffers(), BufferPool::kKeepPerSize);
  EXPECT_LE(pool->free_bytes(), BufferPool::kKeepTotal);
}

TEST(BufferPool, TensorsOutliveThePool) {
  torch::Tensor t;
  {
    auto pool = BufferPool::create();
    t = pool->take({BufferPool::kMinBytes / 8}, torch::kDouble);
  }
  t.fill_(2.0);
  EXPECT_EQ(t.sum().item<double>(), 2.0 * static_cast<double>(BufferPool::kMinBytes / 8));
}

}  // namespace
}  // namespace tandem::mpi
