// How CUDA tensors travel between ranks (staging.h): which path a transport takes, the refusal
// of the direct path on an MPI that is not CUDA-aware, and, on a machine with a GPU, CUDA
// tensors that arrive exactly on every path this MPI offers. Run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "mpi/environment.h"
#include "mpi/mpi_transport.h"
#include "tandem/common/check.h"

namespace tandem::mpi {
Environment& test_environment();
namespace {

using CudaPath = MpiTransportOptions::CudaPath;
using transport::MessageKey;

MpiTransportOptions options_for(CudaPath path, c10::Device device = c10::kCPU) {
  MpiTransportOptions o;
  o.comm_timeout_s = 30.0;
  o.cuda_path = path;
  o.device = device;
  return o;
}

TEST(CudaPath, FollowsWhatThisMpiCanDo) {
  Environment& env = test_environment();
  const Layout layout{env.size(), 1};
  {
    MpiTransport t(env, layout, options_for(CudaPath::kStaged));
    EXPECT_FALSE(t.cuda_direct());
  }
  {
    MpiTransport t(env, layout, options_for(CudaPath::kAuto));
    EXPECT_EQ(t.cuda_direct(), env.cuda_aware());
  }
  if (env.cuda_aware()) {
    MpiTransport t(env, layout, options_for(CudaPath::kDirect));
    EXPECT_TRUE(t.cuda_direct());
    return;
  }
  // Every rank refuses before any collective call, so no rank waits for another.
  try {
    MpiTransport t(env, layout, options_for(CudaPath::kDirect));
    FAIL() << "the direct path was accepted on an MPI that is not CUDA-aware";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not CUDA-aware"), std::string::npos) << what;
    EXPECT_NE(what.find("MpiTransportOptions::cuda_path = staged"), std::string::npos) << what;
    EXPECT_NE(what.find(env.library_version()), std::string::npos) << what;
  }
}

// A ring of CUDA tensors (several shapes, one of 16 MiB, a non-contiguous one) on every path
// this MPI has; the received tensors are on the GPU and equal to what was sent, bit for bit.
TEST(CudaPath, CudaTensorsArriveExactlyOnEveryPathThisMpiHas) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Environment& env = test_environment();
  const int rank = env.rank(), size = env.size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const c10::Device gpu(c10::kCUDA, 0);
  std::vector<CudaPath> paths = {CudaPath::kStaged};
  if (env.cuda_aware()) paths.push_back(CudaPath::kDirect);
  auto value = [gpu](int from, int m) {
    const std::vector<std::vector<int64_t>> shapes = {{3}, {}, {64, 33}, {1024, 4096}};
    torch::Tensor t = torch::rand(shapes[m % shapes.size()],
                                  torch::TensorOptions().dtype(torch::kFloat).device(gpu)) +
                      from;
    return m == 2 ? t.t() : t;  // transposed: not contiguous
  };
  for (CudaPath path : paths) {
    MpiTransport t(env, Layout{size, 1}, options_for(path, gpu));
    std::vector<torch::Tensor> sent;
    torch::manual_seed(100 + rank);
    for (int m = 0; m < 4; ++m) {
      sent.push_back(value(rank, m));
      t.send(rank, next, MessageKey{"act", 0, m, false, rank, next}, sent.back(), nullptr);
    }
    torch::manual_seed(100 + prev);
    for (int m = 0; m < 4; ++m) {
      const torch::Tensor expect = value(prev, m);
      const torch::Tensor got = t.recv(rank, prev, MessageKey{"act", 0, m, false, prev, rank}, gpu);
      EXPECT_TRUE(got.is_cuda()) << "micro-batch " << m;
      EXPECT_TRUE(got.equal(expect))
          << "micro-batch " << m << " on the " << (path == CudaPath::kDirect ? "direct" : "staged")
          << " path";
    }
  }
}

}  // namespace
}  // namespace tandem::mpi
