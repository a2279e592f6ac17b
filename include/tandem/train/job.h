// How a training process joins its job: alone (in-process devices) or as one rank of an MPI
// job (stages x spatial x replicas ranks, one device each). Owns the MPI environment and
// transport for its life. `tandem train` runs on it, and so does a program of one's own:
//
//   train::Config c;                   // c.replicas = 2, ...
//   train::Job job(c);                 // under `mpirun -n 8`: rank r of 8, one device each
//   job.agree(c);                      // every rank the same configuration, or a clear error
//   return job.guard([&] {
//     auto trainer = job.trainer(c, my_model(), std::make_unique<MySource>());
//     train::Result r = trainer->run();
//     if (trainer->pipeline().owns_loss()) std::cout << job.prefix() << r.loss << "\n";
//   });
//
// Built without MPI, a Job is always in process, and refuses to run under a launcher (each rank
// would train the whole model alone).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/checkpoint/save.h"
#include "tandem/graph/model.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/train/config.h"
#include "tandem/train/source.h"
#include "tandem/train/trainer.h"
#include "tandem/transport/transport.h"

namespace tandem::train {

class Job {
 public:
  // Decides the transport (`config.transport`: auto | inprocess | mpi; auto picks MPI when
  // started by a launcher with more than one rank) and, under MPI, sets up the environment and
  // checks that the ranks hold `config`'s layout (see placed()). Throws tandem::Error for
  // impossible layouts, naming the Config fields as the command line's flags (--replicas for
  // Config::replicas).
  explicit Job(const Config& config);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // A trainer on this job: its transport, the memory measurement once for the job, and the
  // ranks of its checkpoints. The catalog's model and data (Config::model, Config::data), or
  // one's own (see Trainer). Collective under MPI: every rank makes its trainer.
  std::unique_ptr<Trainer> trainer(const Config& config);
  std::unique_ptr<Trainer> trainer(const Config& config, graph::Model model,
                                   std::unique_ptr<Source> source);
  // `config` as this job runs it. Under MPI each rank holds one device (and Config::spatial
  // must be the transport's: see relayout): a count of devices
  // (Config::devices, given or not) becomes the job's stage devices per replica, a list is
  // checked against them, and --threads-per-device auto (0) gives each rank the node's cores
  // divided by the ranks. Throws tandem::Error where the ranks cannot hold `config`'s stages,
  // slabs and replicas. In process: `config` unchanged. The trainers of the job run on it.
  Config placed(const Config& config) const;
  // Under MPI: the transport made again for `config`'s layout (its stages, --spatial and
  // replicas on the same ranks), as `tandem train --auto` does once it has chosen --spatial.
  // Collective; no trainer of the job may hold the old transport. In process: nothing.
  void relayout(const Config& config);
  // Runs `make` once for the job and returns its text on every process: under MPI on rank 0
  // only, and collective; in process, make().
  std::string once(const std::function<std::string()>& make);
  // The sums over every replica of numbers that `pipeline`'s loss stage holds (the loss, the
  // held-out metric and count); the other stages' numbers count as 0. Collective over the loss
  // stage's data-parallel group under MPI; in process (one replica), `mine`.
  std::vector<double> sum_over_replicas(const runtime::Pipeline& pipeline,
                                        const std::vector<double>& mine);
  // The ranks that write `pipeline`'s checkpoints: under MPI those of replica 0, between
  // barriers of the job; in process, this one.
  checkpoint::World checkpoint_world(const runtime::Pipeline& pipeline, int replicas);
  // Runs `body` and returns 0; an exception it throws is printed to stderr with the rank prefix
  // ("[r2/4] tandem: ...") and, under MPI, ends the job on every rank with its status
  // (train/failure.h: 3 out of memory, else 1; a hang otherwise: the other ranks would wait
  // for this one). In process it returns that status.
  int guard(const std::function<void()>& body);

  bool mpi() const { return static_cast<bool>(transport_); }
  int rank() const { return rank_; }
  int world() const { return world_; }
  std::string host() const { return host_; }
  // "[r2/4] " under MPI, "" otherwise.
  std::string prefix() const;
  std::shared_ptr<transport::Transport> transport() const { return transport_; }
  // Under MPI: all ranks must run the same configuration; throws naming the ranks that differ.
  void agree(const Config& config);
  // The same for other settings, as "key=value ..." words (the message names those that differ).
  void agree(const std::string& settings);
  // Under MPI: every rank's `text`, on rank 0 (others get an empty list); collective. In
  // process: {text}.
  std::vector<std::string> gather(const std::string& text);
  // The same on every rank; collective.
  std::vector<std::string> all_gather(const std::string& text);
  // Whether `mine` is true on every rank (in process: `mine`); collective under MPI. How the job
  // decides as one, e.g. to skip a step whose gradients overflowed on some rank.
  bool everywhere(bool mine);
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
  // Makes the MPI transport for `c`'s layout (collective).
  void make_transport(const Config& c);

  struct Mpi;
  std::unique_ptr<Mpi> mpi_;
  std::shared_ptr<transport::Transport> transport_;
  int rank_ = 0;
  int world_ = 1;
  int spatial_ = 1;  // of the transport's layout (under MPI)
  std::string host_;
};

}  // namespace tandem::train
