// A training run: model, data, pipeline, optimizer, epochs, evaluation.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "tandem/checkpoint/save.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/train/config.h"
#include "tandem/train/source.h"

namespace tandem::train {

struct Result {
  int64_t steps = 0;
  // Mean training loss of the last step over its whole batch (all replicas); NaN when this run
  // trained no step (--eval-only, or a resumed run that was already complete).
  double loss = std::numeric_limits<double>::quiet_NaN();
  double test_metric = 0;  // the model's metric on the held-out set (NaN when it is empty)
  std::string metric_name = "accuracy";
  double samples_per_s = 0;  // training samples per second over all steps (all replicas)
  double seconds = 0;        // training time, evaluation excluded
  // Per device of the pipeline: the most bytes it held at once during training (local
  // devices only).
  std::vector<uint64_t> peak_bytes;
  // The parameters' fingerprint after the run (weights_fingerprint, fingerprint.h): set by the
  // caller that computes it (tandem train does, for its result line and --report); else empty.
  std::string weights;
};

// Called after every step: (step number from 1, total steps, the step's stats, samples per
// second so far). Pipeline::last_timings() then holds the step's measured actions.
using StepCallback = std::function<void(int64_t, int64_t, const runtime::StepStats&, double)>;

// Runs `make` once for the whole job and returns its text on every process. Under MPI: on rank
// 0 only, and collective (tandem's command line builds one on its launch's all-gather).
using OnceForTheJob = std::function<std::string(const std::function<std::string()>& make)>;

class Trainer {
 public:
  // The model and data set that Config::model and Config::data name in the catalog
  // (train/catalog.h). Builds the model, reads the data's headers, partitions and places the
  // stages, and loads --init-from or --resume: everything that can refuse the run happens here,
  // before its first step. `transport` null: in-process devices (Job::transport under MPI).
  // `once` (null: this process alone; Job::once under MPI) runs the layer measurement of a
  // memory plan (--partition memory or fit, --plan-only) once for the job. Throws tandem::Error
  // for bad configurations and input files that do not fit them (data, checkpoints, a save
  // folder of another run), with the values; memory::DoesNotFit when a batch of the data cannot
  // fit the machine's memory.
  Trainer(Config config, std::shared_ptr<transport::Transport> transport = nullptr,
          const OnceForTheJob& once = nullptr);
  // A model and a data source of one's own, with every other option of `config`: the same run
  // as if they were in the catalog. Config::model and Config::data then only name them (in
  // messages; the data's name is kept in checkpoints and checked on resume). Build the model
  // after torch::manual_seed(config.seed) for the seed's parameters, as the catalog's are.
  Trainer(Config config, graph::Model model, std::unique_ptr<Source> source,
          std::shared_ptr<transport::Transport> transport = nullptr,
          const OnceForTheJob& once = nullptr);

  runtime::Pipeline& pipeline() { return *pipeline_; }
  const runtime::Pipeline& pipeline() const { return *pipeline_; }
  const Config& config() const { return config_; }
  const Source& source() const { return *source_; }
  int64_t total_steps() const;
  // Which data-parallel replica this process runs (0 in process).
  int replica() const { return replica_; }
  // With --partition memory or fit, or --plan-only: the predicted bytes per stage
  // (memory_plan_table) and, with --device-memory, whether they fit; else empty.
  const std::string& memory_plan() const { return memory_plan_; }
  // False when the memory plan's peaks exceed --device-memory on some device.
  bool plan_fits() const { return plan_fits_; }
  // The learning rate of step `step` (0-based) under --lr-schedule.
  double learning_rate(int64_t step) const;
  // Under MPI: the ranks, this one, and a barrier over all of them, for checkpoints.
  void set_checkpoint_world(checkpoint::World world) { world_ = std::move(world); }

  Result run(const StepCallback& on_step = nullptr);
  // Evaluation over the whole held-out set: the model's metric per sample (NaN for an empty
  // held-out set). With replicas each scores every R-th evaluation step, and their sums are
  // added up (collective).
  double evaluate();

 private:
  // The options that need neither model nor data.
  void check_options() const;
  // Partitions and places `model`'s stages over the devices of the configuration (source_ is
  // set).
  void start(graph::Model model, std::shared_ptr<transport::Transport> transport,
             const OnceForTheJob& once);
  // Loads the --resume checkpoint and checks that it belongs to this run (seed, data, batch,
  // steps); sets start_step_.
  void resume();
  // The part of a batch this process's stages read: `read` runs only when they read the input
  // or the target, so a rank in the middle of the pipeline never touches the data.
  Batch local_batch(const std::function<Batch()>& read) const;
  // With replicas: the sums over every replica of numbers the loss stage holds (the loss, the
  // held-out metric and count); collective over the loss stage's data-parallel group.
  std::vector<double> sum_over_replicas(const std::vector<double>& mine);

  Config config_;
  std::unique_ptr<Source> source_;
  std::unique_ptr<runtime::Pipeline> pipeline_;
  int replica_ = 0;
  int64_t start_step_ = 0;  // steps done before this run: the resumed checkpoint's
  std::shared_ptr<transport::Transport> transport_;  // null in process
  std::string memory_plan_;
  bool plan_fits_ = true;
  checkpoint::World world_;
};

}  // namespace tandem::train
