// MpiTransport::all_reduce_sum: weight-gradient sums over the data-parallel group.
#include <chrono>
#include <map>

#include "mpi/mpi_transport.h"
#include "mpi/operations.h"
#include "mpi/wire.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

// The dtype the sum is computed in: the tensor's own where MPI can sum it, float32 for the
// 16-bit floats (rounded back when copied into the tensors).
c10::ScalarType reduce_dtype(c10::ScalarType dtype) {
  if (dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16) return c10::kFloat;
  TANDEM_CHECK(mpi_sum_type(dtype) != MPI_DATATYPE_NULL,
               "all_reduce_sum cannot sum tensors of type {}; weight gradients are float, "
               "double, half, bfloat16 or integer",
               c10::toString(dtype));
  return dtype;
}

}  // namespace

void MpiTransport::all_reduce_sum(int device, std::vector<torch::Tensor>& tensors) {
  check_local(device, "all_reduce_sum:");
  if (layout_.replicas * layout_.slabs == 1 || tensors.empty()) return;
  if (mailbox_.aborted()) throw transport::Aborted("all_reduce_sum after abort");

  // One flat buffer per dtype, in dtype order: the same sequence of MPI_Iallreduce calls on
  // every rank of the group, since they all pass the same tensors.
  std::map<c10::ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TANDEM_CHECK(tensors[i].defined(), "all_reduce_sum: tensor {} of {} is undefined", i,
                 tensors.size());
    by_dtype[tensors[i].scalar_type()].push_back(i);
  }
  torch::NoGradGuard no_grad;
  for (const auto& [dtype, indices] : by_dtype) {
    const c10::ScalarType wide = reduce_dtype(dtype);
    std::vector<torch::Tensor> flat;
    flat.reserve(indices.size());
    for (size_t i : indices) flat.push_back(tensors[i].detach().reshape({-1}).to(c10::kCPU, wide));
    torch::Tensor buffer = torch::cat(flat).contiguous();
    if (buffer.numel() == 0) continue;

    auto done = std::make_shared<Completion>();
    engine_->submit(make_all_reduce(data_parallel_comm_.get(), buffer, mpi_sum_type(wide), done));
    auto deadline =
        Completion::Clock::now() + std::chrono::duration_cast<Completion::Clock::duration>(
                                       std::chrono::duration<double>(options_.comm_timeout_s));
    switch (done->wait(deadline, [this] { return mailbox_.aborted(); })) {
      case Completion::Outcome::kDone:
        break;
      case Completion::Outcome::kAborted:
        throw transport::Aborted("all_reduce_sum interrupted by abort");
      case Completion::Outcome::kTimedOut:
        throw transport::CommTimeout(fmt::format(
            "{} rank {}: the all-reduce of {} {} tensors ({} elements) over data-parallel group "
            "[{}] did not finish within {:g} s; a rank of the group did not join it{}",
            prefix_, rank_, indices.size(), c10::toString(dtype), buffer.numel(),
            fmt::join(data_parallel_group(), ", "), options_.comm_timeout_s, group_note()));
    }
    int64_t offset = 0;
    for (size_t i : indices) {
      int64_t n = tensors[i].numel();
      tensors[i].copy_(buffer.narrow(0, offset, n).view(tensors[i].sizes()));
      offset += n;
    }
  }
}

}  // namespace tandem::mpi
