// How a `tandem train` process joins its job: alone (in-process devices) or as one rank of an
// MPI job. Owns the MPI environment and transport for the life of the command.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/train/config.h"
#include "tandem/transport/transport.h"

namespace tandem::cli {

class Launch {
 public:
  // Decides the transport (`config.transport`: auto | inprocess | mpi; auto picks MPI when
  // started by a launcher with more than one rank) and, under MPI, sets up the environment
  // and adjusts `config` (one device per rank). Throws tandem::Error for impossible layouts.
  explicit Launch(train::Config& config);
  ~Launch();

  bool mpi() const { return static_cast<bool>(transport_); }
  int rank() const { return rank_; }
  int world() const { return world_; }
  std::string host() const { return host_; }
  // "[r2/4] " under MPI, "" otherwise.
  std::string prefix() const;
  std::shared_ptr<transport::Transport> transport() const { return transport_; }
  // Under MPI: all ranks must run the same configuration; throws naming the ranks that differ.
  void agree(const train::Config& config);
  // The same for other settings, as "key=value ..." words (the message names those that differ).
  void agree(const std::string& settings);
  // Under MPI: every rank's `text`, on rank 0 (others get an empty list); collective. In
  // process: {text}.
  std::vector<std::string> gather(const std::string& text);
  // The same on every rank; collective.
  std::vector<std::string> all_gather(const std::string& text);
  // Under MPI: how CUDA tensors go between ranks, "GPU to GPU (CUDA-aware MPI)" or "through
  // pinned host memory (...)"; in process: "".
  std::string cuda_path() const;
  // Under MPI: waits for every rank (collective); in process: nothing.
  void barrier();
  // Microseconds to add to this process's steady clock to get rank 0's (0 in process);
  // collective under MPI.
  double clock_offset_us();
  // Under MPI: the job ends on every rank with `exit_status` (mpirun's status), after `message`
  // is printed with this rank's prefix. In process: nothing.
  void abort(const std::string& message, int exit_status = 1);

 private:
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;
  std::shared_ptr<transport::Transport> transport_;
  int rank_ = 0;
  int world_ = 1;
  std::string host_;
};

}  // namespace tandem::cli
