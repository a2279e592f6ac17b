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
#include "tandem/train/loss_scale.h"
#include "tandem/train/run_plan.h"
#include "tandem/train/source.h"

namespace tandem::train {

class Job;

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
  // Loss scaling (Config::loss_scaling): the scale of the next step (0 without scaling) and the
  // steps the optimizer skipped, because a gradient overflowed, over the whole run (a resumed
  // run's include its checkpoint's).
  double loss_scale = 0;
  int64_t skipped_steps = 0;
  // The parameters' fingerprint after the run (weights_fingerprint, fingerprint.h): set by the
  // caller that computes it (tandem train does, for its result line and --report); else empty.
  std::string weights;
};

// Called after every step: (step number from 1, total steps, the step's stats, samples per
// second so far). Pipeline::last_timings() then holds the step's measured actions.
using StepCallback = std::function<void(int64_t, int64_t, const runtime::StepStats&, double)>;

class Trainer {
 public:
  // The model and data set that Config::model and Config::data name in the catalog
  // (train/catalog.h). Builds the model, reads the data's headers, plans the run (plan_run:
  // partition, placement, memory plan), builds its pipeline from the plan, and loads
  // --init-from or --resume: everything that can refuse the run happens here, before its first
  // step. In process: every device in this process. Throws tandem::Error for bad
  // configurations and input files that do not fit them (data, checkpoints, a save folder of
  // another run), with the values; memory::DoesNotFit when a batch of the data cannot fit the
  // machine's memory. The trainer runs on a job of its own, in process (Job, with
  // Config::transport = inprocess): refused in a process that an MPI launcher started as one of
  // several ranks (unless Config::transport = inprocess), where the trainer is made on the job.
  explicit Trainer(Config config);
  // A model and a data source of one's own, with every other option of `config`: the same run
  // as if they were in the catalog. Config::model and Config::data then only name them (in
  // messages; the data's name is kept in checkpoints and checked on resume). Build the model
  // after torch::manual_seed(config.seed) for the seed's parameters, as the catalog's are.
  Trainer(Config config, graph::Model model, std::unique_ptr<Source> source);
  // The same on `job` (Job::trainer makes them), with `config` as the job places it
  // (Job::placed): under MPI its transport, the memory plan's layer measurement once for the job
  // (rank 0 measures), its ranks for checkpoints (the ranks of replica 0 write their stages
  // between barriers of the job) and its sums over replicas. `job` outlives the trainer.
  Trainer(Job& job, Config config);
  Trainer(Job& job, Config config, graph::Model model, std::unique_ptr<Source> source);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  runtime::Pipeline& pipeline() { return *pipeline_; }
  const runtime::Pipeline& pipeline() const { return *pipeline_; }
  const Config& config() const { return config_; }
  const Source& source() const { return *source_; }
  int64_t total_steps() const;
  // Which data-parallel replica this process runs (0 in process).
  int replica() const { return pipeline_->replica(); }
  // What the run was built from: its plan.
  const RunPlan& plan() const { return plan_; }
  // With --partition memory or fit, or --plan-only: the predicted bytes per stage
  // (memory_plan_table) and, with --device-memory, whether they fit; else empty.
  const std::string& memory_plan() const { return plan_.memory_plan; }
  const std::string& split() const { return plan_.split; }  // RunPlan::split
  // False when the memory plan's peaks exceed --device-memory on some device.
  bool plan_fits() const { return plan_.fits; }
  // The loss scaler of a run that scales its loss (scales_loss(config)); else null.
  const LossScaler* loss_scaler() const { return loss_scaler_.get(); }
  // The learning rate of step `step` (0-based) under --lr-schedule.
  double learning_rate(int64_t step) const;

  Result run(const StepCallback& on_step = nullptr);
  // One training step, `step` counted from 0 (it picks the step's samples and learning rate):
  // forward, backward and the optimizer's update. The parameters' gradients stay until the
  // next step. The loss is the step's over every replica. With loss scaling, a step whose
  // gradients are not all finite, on any device or rank, updates no weight anywhere
  // (StepStats::skipped). Collective under MPI.
  runtime::StepStats train_step(int64_t step);
  // Evaluation over the whole held-out set: the model's metric per sample (NaN for an empty
  // held-out set). With replicas each scores every R-th evaluation step, and their sums are
  // added up (collective).
  double evaluate();

 private:
  // Plans the run of `model` (source_ and job_ are set) and builds its pipeline from the plan.
  void build(graph::Model model);
  // The catalog's model and data of config_, on job_: checked, read and built.
  void build_from_catalog();
  // Loads the --resume checkpoint and checks that it belongs to this run (seed, data, batch,
  // steps); sets start_step_.
  void resume();
  // The part of a batch this process's stages read: `read` runs only when they read the input
  // or the target, so a rank in the middle of the pipeline never touches the data.
  Batch local_batch(const std::function<Batch()>& read) const;
  std::unique_ptr<Job> own_job_;  // Trainer(Config): the in-process job of this trainer alone
  Job* job_ = nullptr;
  Config config_;
  std::unique_ptr<Source> source_;
  RunPlan plan_;
  std::unique_ptr<runtime::Pipeline> pipeline_;
  int64_t start_step_ = 0;                   // steps done before this run: the resumed checkpoint's
  std::unique_ptr<LossScaler> loss_scaler_;  // set when the run scales its loss
};

}  // namespace tandem::train
