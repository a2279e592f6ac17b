// MpiTransport: the Transport between the ranks of an MPI job. Device index = rank; each rank
// owns exactly one device (its stage device in its replica, see layout.h).
//
// Ownership and threads: the transport owns three private communicators (tensor messages,
// helpers, data-parallel group) and a ProgressEngine whose thread makes every MPI call while
// the transport lives. send/recv/all_reduce_sum/abort are thread-safe and never call MPI on
// the caller's thread; they hand work to that thread and wait on condition variables.
//
// Message flow: send() turns the tensor into host bytes (CPU: the tensor's own contiguous
// storage, kept alive until MPI_Isend completes; CUDA: after `ready`, a copy into pinned host
// memory) and queues a header + payload. The receiving progress thread reads headers as they
// come, posts the payload receives, and files finished tensors by (peer, key); recv() waits
// for its exact key, so arrival order does not matter. CUDA tensors travel through pinned host
// memory, or, when MPI is CUDA-aware, straight from GPU to GPU (staging.h): every rank owns one
// device, so a receive buffer can be allocated on it as soon as the header arrives.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpi/environment.h"
#include "mpi/handles.h"
#include "mpi/layout.h"
#include "mpi/mailbox.h"
#include "mpi/progress_engine.h"
#include "mpi/wait_query.h"
#include "tandem/transport/transport.h"

namespace tandem::mpi {

struct MpiTransportOptions {
  // A recv (or all-reduce) that waits longer than this throws transport::CommTimeout.
  double comm_timeout_s = 300.0;
  // How CUDA tensors travel between ranks. kAuto: direct when MPI is CUDA-aware, else staged;
  // kDirect on an MPI that is not CUDA-aware is refused. All-reduces are always staged.
  enum class CudaPath { kAuto, kStaged, kDirect };
  CudaPath cuda_path = CudaPath::kAuto;
  // This rank's device: on the direct path, where payloads for a GPU are received.
  c10::Device device{c10::kCPU};
};

class MpiTransport : public transport::Transport {
 public:
  // Collective over MPI_COMM_WORLD: every rank constructs its transport at the same point.
  // Throws tandem::Error unless the world size is layout.stages_devices * layout.replicas.
  // `env` must outlive the transport.
  MpiTransport(const Environment& env, Layout layout, MpiTransportOptions options = {});
  // Collective: waits until every rank's sends were received, at most max(comm timeout,
  // 60 s); see ProgressEngine.
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int num_devices() const override { return size_; }
  std::vector<int> local_devices() const override { return {rank_}; }
  // from_device must be this rank. Throws transport::Aborted after abort().
  void send(int from_device, int to_device, const transport::MessageKey& key,
            const torch::Tensor& tensor, transport::ReadyEvent ready) override;
  // to_device must be this rank. CommTimeout names this rank, the peer and the key, lists the
  // keys that did arrive from that peer, and follows the chain of waiting ranks (the peer waits
  // for another rank, which waits for ...) to the rank that does not answer, waits for
  // nothing, or closes a deadlock (wait_query.h).
  torch::Tensor recv(int to_device, int from_device, const transport::MessageKey& key,
                     c10::Device into) override;
  // Collective over the data-parallel group: all its ranks pass tensors of the same dtypes
  // and sizes in the same order. Sums per dtype in one flat host buffer (half and bfloat16 in
  // float32); MPI_Iallreduce with MPI_SUM. Throws CommTimeout or Aborted like recv().
  void all_reduce_sum(int device, std::vector<torch::Tensor>& tensors) override;
  // Prints "[r2/4] <reason>" to stderr (first call only), wakes every recv with Aborted, and
  // ends the job with MPI_Abort(MPI_COMM_WORLD, 1). Does not return.
  void abort(const std::string& reason) override { abort(reason, 1); }
  // The same, ending the job with `exit_status` (mpirun reports it), e.g. 3 for out of memory.
  [[noreturn]] void abort(const std::string& reason, int exit_status);
  bool aborted() const override { return mailbox_.aborted(); }
  // Nothing to recover: under MPI a failed step has ended the job (the failing rank's abort()
  // does not return, and MPI_Abort ends every rank), so no step ever follows a failed one.
  void reset() override {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether CUDA tensors go from GPU memory to GPU memory (a CUDA-aware MPI), not via the host.
  bool cuda_direct() const { return cuda_direct_; }
  const Layout& layout() const { return layout_; }
  // The ranks this rank sums weight gradients with, itself included.
  std::vector<int> data_parallel_group() const { return layout_.data_parallel_group(rank_); }

  // The helpers of collectives.h over all ranks, run on the progress thread. Collective.
  void agree_on(uint64_t config_hash, const std::string& description);
  double clock_offset_us();
  std::vector<std::string> gather_strings(const std::string& text);
  std::vector<std::string> all_gather_strings(const std::string& text);
  double raw_pingpong_gbps(size_t bytes, int iters, int peer);
  void barrier();

 private:
  void check_local(int device, const char* what) const;
  std::string stashed_note(int peer) const;
  // Asks `peer` what it waits for; nothing when it does not answer within answer_window_s().
  std::optional<WaitAnswer> ask_what_waits(int peer);
  double answer_window_s() const;
  std::string describe_wait(int peer, const std::optional<WaitAnswer>& answer) const;
  // "; rank 2 has itself waited ... from rank 1; rank 1 does not answer ...", or "".
  std::string wait_chain(int peer);
  // What each other rank of the data-parallel group waits for, for an all-reduce timeout.
  std::string group_note();

  int rank_;
  int size_;
  std::string prefix_;
  Layout layout_;
  MpiTransportOptions options_;
  bool cuda_direct_ = false;
  Communicator tensor_comm_;
  Communicator control_comm_;
  Communicator data_parallel_comm_;
  Mailbox mailbox_;
  std::atomic<uint64_t> next_question_{1};
  std::unique_ptr<ProgressEngine> engine_;  // last: its thread uses everything above
};

}  // namespace tandem::mpi
