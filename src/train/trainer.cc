#include "tandem/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "checkpoint/optimizer_state.h"
#include "common/launcher.h"
#include "tandem/checkpoint/all.h"
#include "tandem/common/check.h"
#include "tandem/train/catalog.h"
#include "tandem/train/job.h"

namespace tandem::train {

namespace {

// A trainer made in process under a launcher of several ranks would train the whole model once
// per rank, each believing itself rank 0 of 1 (and racing the others on the same checkpoints).
void refuse_under_launcher(const Config& c) {
  TANDEM_CHECK(c.transport == TransportKind::kInProcess ||
                   !(launched_by_mpi_launcher() && launched_world_size() > 1),
               "this process is one of {} ranks started by an MPI launcher: make the trainer on "
               "the job (train::Job job(config); job.trainer(config)), which gives it the ranks, "
               "the transport and the checkpoints' barriers; or give Config::transport = "
               "inprocess to run each rank on its own on purpose",
               launched_world_size());
}

// Eval of a checkpoint and a resumed run standardize their inputs as its training did: the
// checkpoint's record (the mode and the measured moments) takes the place of the data kind's
// default, where the data is of the same kind; a --normalize that differs is refused. A state
// dict, and a checkpoint from before the record, say nothing.
void take_recorded_normalization(Config& c) {
  const std::string& path = c.eval_only ? c.init_from : c.plan_only ? std::string() : c.resume;
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_directory(path, ec)) return;
  const checkpoint::TrainState st =
      checkpoint::read_manifest(checkpoint::resolve_checkpoint(path)).state;
  const data::Normalization& n = st.normalization;
  // The kind is the name before a folder's colon (npy:DIR); a checkpoint's may be a data set a
  // program of its own registered, which this process need not know.
  auto kind = [](const std::string& data) { return data.substr(0, data.find(':')); };
  if (n.mode == data::Normalize::kDefault || st.data.empty() || kind(st.data) != kind(c.data))
    return;
  TANDEM_CHECK(c.normalize.mode == data::Normalize::kDefault || c.normalize.mode == n.mode,
               "the checkpoint '{}' was trained on inputs {} (--normalize {}); {} applies the "
               "same: leave out --normalize {} or give {}",
               path, data::describe(n), data::normalize_name(n.mode),
               c.eval_only ? "eval" : "a resumed run", data::normalize_name(c.normalize.mode),
               data::normalize_name(n.mode));
  c.normalize = n;
}

// The job of a trainer made without one: in this process alone.
std::unique_ptr<Job> job_in_process(const Config& c) {
  refuse_under_launcher(c);
  Config alone = c;
  alone.transport = TransportKind::kInProcess;
  return std::make_unique<Job>(alone);
}

}  // namespace

Trainer::Trainer(Config config)
    : own_job_(job_in_process(config)), job_(own_job_.get()), config_(std::move(config)) {
  build_from_catalog();
}

Trainer::Trainer(Config config, graph::Model model, std::unique_ptr<Source> source)
    : own_job_(job_in_process(config)),
      job_(own_job_.get()),
      config_(std::move(config)),
      source_(std::move(source)) {
  TANDEM_CHECK(source_ != nullptr, "Trainer: the model of one's own needs a Source, not null");
  build(std::move(model));
}

Trainer::Trainer(Job& job, Config config) : job_(&job), config_(job.placed(config)) {
  build_from_catalog();
}

Trainer::Trainer(Job& job, Config config, graph::Model model, std::unique_ptr<Source> source)
    : job_(&job), config_(job.placed(config)), source_(std::move(source)) {
  TANDEM_CHECK(source_ != nullptr, "Trainer: the model of one's own needs a Source, not null");
  build(std::move(model));
}

Trainer::~Trainer() = default;

void Trainer::build_from_catalog() {
  check_config(config_);
  take_recorded_normalization(config_);
  // The data first: the built-in models take their input size from its samples.
  source_ = make_source(config_, model_needs(config_));
  check_sample(config_, source_->input_shape());
  torch::manual_seed(config_.seed);  // parameter initialization
  build(make_model(config_, source_->input_shape()));
}

void Trainer::build(graph::Model model) {
  PlanPlace place;
  place.per_rank = job_->mpi();
  place.job = job_;
  plan_ = plan_run(config_, model, *source_, place);
  const Config& c = config_;
  runtime::PipelineOptions po = plan_.pipeline;
  po.transport = job_->transport();
  pipeline_ = std::make_unique<runtime::Pipeline>(std::move(model), plan_.partition, std::move(po));
  // A bad data file (or a damaged sample) ends the run here, before the first step, on the
  // processes whose stages read the data; only they read it.
  if (pipeline_->needs_input() || pipeline_->needs_target()) source_->load();
  if (!pipeline_->model().input_shape.empty() && pipeline_->needs_input()) {
    // Samples that do not fit the model's declared input are found now, not at the first step.
    const Batch one =
        source_->test_size() > 0 ? source_->test_batch(0, 1) : source_->train_batch(0, 0, 1);
    graph::fit_input(pipeline_->model(), one.input);
  }
  pipeline_->set_optimizer(plan_.optimizer);
  if (scales_loss(c))
    loss_scaler_ = std::make_unique<LossScaler>(c.loss_scale_init, c.loss_scale_interval);
  if (!c.init_from.empty()) checkpoint::init_from(*pipeline_, c.init_from);
  if (!c.resume.empty() && !c.eval_only && !c.plan_only) resume();
}

void Trainer::resume() {
  const int64_t global_batch = plan_.global_batch;
  const int64_t per_epoch = plan_.steps_per_epoch;
  const int64_t total = plan_.total_steps;
  const checkpoint::TrainState st = checkpoint::load(*pipeline_, config_.resume);
  TANDEM_CHECK(
      st.seed == config_.seed,
      "the checkpoint was saved with Config::seed = {}, not {}; resume with Config::seed = {}",
      st.seed, config_.seed, st.seed);
  // The data set belongs to the run like its seed; older checkpoints do not say theirs.
  TANDEM_CHECK(st.data.empty() || st.data == config_.data,
               "the checkpoint was saved from a run on Config::data = {}, not {}; resume with "
               "Config::data = {}, "
               "or start a new run from its parameters with Config::init_from",
               st.data, config_.data, st.data);
  TANDEM_CHECK(st.position == (st.step % per_epoch) * global_batch,
               "the checkpoint was taken at sample {} of its epoch, which Config::batch = {} x "
               "Config::replicas = {} "
               "cannot reach; resume with the batch and replicas it was saved with",
               st.position, config_.batch, config_.replicas);
  TANDEM_CHECK(st.step <= total,
               "the checkpoint {} is at step {}, past the {} steps of this run: give more "
               "Config::steps or Config::epochs to continue it, or evaluate it with tandem eval "
               "--checkpoint {}",
               config_.resume, st.step, total, config_.resume);
  start_step_ = st.step;
  // A run that scales its loss goes on from the checkpoint's scale; one saved without scaling
  // (another precision) starts from Config::loss_scale_init.
  if (loss_scaler_ && st.loss_scale > 0)
    loss_scaler_->restore(st.loss_scale, st.loss_scale_clean_steps, st.skipped_steps);
}

double Trainer::learning_rate(int64_t step) const {
  if (config_.lr_schedule == LrSchedule::kConstant) return config_.lr;
  const double progress =
      static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total_steps()));
  return config_.lr * 0.5 * (1.0 + std::cos(std::acos(-1.0) * progress));
}

int64_t Trainer::total_steps() const { return plan_.total_steps; }

Result Trainer::run(const StepCallback& on_step) {
  const int64_t global_batch = plan_.global_batch;
  const int64_t per_epoch = plan_.steps_per_epoch;
  const int64_t total = plan_.total_steps;
  Result r;
  r.metric_name = pipeline_->model().metric_name;
  if (config_.eval_only) {
    r.test_metric = evaluate();
    return r;
  }
  int64_t samples = 0;
  const int64_t start = start_step_;
  r.steps = start;        // a complete run resumed again trains nothing and evaluates
  bool replaced = false;  // --overwrite: the other run's checkpoints are gone
  // Rank 0, which writes the manifest, holds stage 0 and has read the inputs: the record costs
  // no read there. Other ranks' record is not written.
  const data::Normalization recorded_normalization =
      !config_.save_dir.empty() && pipeline_->needs_input() ? source_->normalization()
                                                            : data::Normalization{};
  auto save = [&](int64_t done) {
    checkpoint::SaveOptions so;
    so.keep = config_.keep;
    so.world = job_->checkpoint_world(*pipeline_, config_.replicas);
    // Removed only now, so that a run that fails before its first save leaves them as they were.
    if (config_.overwrite && !replaced && so.world.rank == 0)
      checkpoint::remove_checkpoints(config_.save_dir);
    replaced = true;
    checkpoint::TrainState state{done,         done / per_epoch, (done % per_epoch) * global_batch,
                                 config_.seed, config_.data,     recorded_normalization};
    if (loss_scaler_) {
      state.loss_scale = loss_scaler_->scale();
      state.loss_scale_clean_steps = loss_scaler_->clean_steps();
      state.skipped_steps = loss_scaler_->skipped_steps();
    }
    checkpoint::save(*pipeline_, state, config_.save_dir, so);
  };
  for (int64_t step = start; step < total; ++step) {
    const runtime::StepStats s = train_step(step);
    r.seconds += s.seconds;
    samples += global_batch;
    r.loss = s.loss;
    r.steps = step + 1;
    r.peak_bytes.resize(s.peak_bytes.size());
    for (size_t d = 0; d < s.peak_bytes.size(); ++d)
      r.peak_bytes[d] = std::max(r.peak_bytes[d], s.peak_bytes[d]);
    if (on_step) on_step(step + 1, total, s, samples / r.seconds);
    const int64_t done = step + 1;
    if (!config_.save_dir.empty() &&
        ((config_.save_every > 0 && done % config_.save_every == 0) || done == total)) {
      save(done);
    }
  }
  r.samples_per_s = r.seconds > 0 ? samples / r.seconds : 0;
  if (loss_scaler_) {
    r.loss_scale = loss_scaler_->scale();
    r.skipped_steps = loss_scaler_->skipped_steps();
  }
  r.test_metric = evaluate();
  return r;
}

runtime::StepStats Trainer::train_step(int64_t step) {
  const int64_t epoch = step / plan_.steps_per_epoch;
  const int64_t begin =
      (step % plan_.steps_per_epoch) * plan_.global_batch + pipeline_->replica() * config_.batch;
  Batch b = local_batch([&] { return source_->train_batch(epoch, begin, begin + config_.batch); });
  if (loss_scaler_) pipeline_->set_loss_scale(loss_scaler_->scale());
  runtime::StepStats s = pipeline_->forward_backward(b.input, b.target, config_.batch);
  // Each replica's loss is its share of the step's mean (StepStats::loss): the step's is their
  // sum.
  if (config_.replicas > 1 && pipeline_->needs_target())
    s.loss = job_->sum_over_replicas(*pipeline_, {s.loss})[0];
  const double lr = learning_rate(step);
  for (int stage : pipeline_->local_stages()) {
    for (auto& group : pipeline_->optimizer(stage)->param_groups()) group.options().set_lr(lr);
  }
  if (loss_scaler_) {
    s.loss_scale = loss_scaler_->scale();
    // Every process unscales its stages' gradients; the job skips the step as one when any of
    // them holds an infinite or NaN gradient (the replicas' sums carry one to every replica).
    s.skipped = !job_->everywhere(pipeline_->unscale_gradients());
    loss_scaler_->update(!s.skipped);
  }
  if (!s.skipped) pipeline_->optimizer_step();
  // The step's time is the whole step's: its actions, the gradients' sums, the loss over the
  // replicas and the optimizer's step (what the planner plans), the batch's reading not included.
  const double now_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  s.seconds = (now_us - s.started_us) / 1e6;
  // The optimizer's step is part of the step: its temporaries (Adam's, the size of a parameter)
  // count in each local device's peak.
  for (size_t d = 0; d < s.peak_bytes.size(); ++d)
    if (s.peak_bytes[d] > 0)
      s.peak_bytes[d] =
          std::max(s.peak_bytes[d], pipeline_->device_peak_bytes(static_cast<int>(d)));
  return s;
}

Batch Trainer::local_batch(const std::function<Batch()>& read) const {
  const bool input = pipeline_->needs_input(), target = pipeline_->needs_target();
  if (!input && !target) return {};
  Batch b = read();
  b.input = input ? graph::fit_input(pipeline_->model(), b.input) : torch::Tensor();
  if (!target) b.target = torch::Tensor();
  return b;
}

double Trainer::evaluate() {
  const int64_t n = source_->test_size();
  double metric = 0;
  int64_t count = 0;
  // Images evaluate in large chunks; volumes ([C,D,H,W] samples) in training-size batches (they
  // are large), and so does everything under a budget: the memory plan holds for a training
  // step's micro-batches, which an evaluation's (no activations kept) never outgrow.
  const bool volumes = source_->input_shape().size() >= 4;
  const bool training_size = volumes || config_.device_memory > 0;
  const int64_t per_step = training_size ? config_.batch : config_.eval_batch;
  const int64_t m = config_.microbatches;
  const int64_t chunk = std::max<int64_t>(per_step, m);
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();  // no held-out set
  TANDEM_ASSERT(n >= m, "checked when the trainer was made");
  const int replicas = config_.replicas;
  for (int64_t begin = 0, end = 0, k = 0; begin < n; begin = end, ++k) {
    end = std::min(n, begin + chunk);
    if (n - end < m) end = n;  // a tail too short for every micro-batch joins this step
    if (k % replicas != pipeline_->replica()) continue;  // another replica scores this step
    Batch b = local_batch([&] { return source_->test_batch(begin, end); });
    runtime::StepStats s = pipeline_->evaluate(b.input, b.target, end - begin);
    metric += s.metric_sum;
    count += s.samples;
  }
  if (replicas > 1 && pipeline_->needs_target()) {
    const std::vector<double> sums =
        job_->sum_over_replicas(*pipeline_, {metric, static_cast<double>(count)});
    metric = sums[0];
    count = static_cast<int64_t>(sums[1]);
  }
  return count ? metric / count : 0;
}

}  // namespace tandem::train
