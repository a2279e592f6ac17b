#include "tandem/train/trainer.h"

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "checkpoint/optimizer_state.h"
#include "input_fits.h"
#include "memory_partition.h"
#include "tandem/checkpoint/all.h"
#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/schedule/registry.h"
#include "tandem/spatial/slabs.h"
#include "tandem/train/catalog.h"

namespace tandem::train {

namespace {

// The models of the catalog that take volumes, for messages.
std::string volume_models(const Config& c) {
  return one_of(models_that(c, [](const ModelNeeds& n) { return n.volumes; }));
}

// The devices' groups of a spatial split (--spatial N: N devices each), or the devices without
// one. `depth`: the planes of a sample along the model's slab dimension. Refuses, with the
// options' words, what cannot be cut.
int spatial_groups(const graph::Model& model, const Config& c, int devices, int64_t depth) {
  TANDEM_CHECK(c.spatial >= 1, "Config::spatial must be at least 1, not {}", c.spatial);
  if (c.spatial == 1) return devices;
  TANDEM_CHECK(model.slab_refusal.empty(),
               "Config::spatial = {} cuts every sample into depth slabs, but {}: use "
               "Config::spatial = 1 and "
               "split its layers across devices",
               c.spatial, model.slab_refusal);
  TANDEM_CHECK(
      model.slab_dim >= 0,
      "Config::spatial = {} cuts every sample's volume into slabs, but model {} has no volume: "
      "use Config::model = {}",
      c.spatial, c.model, volume_models(c));
  TANDEM_CHECK(
      devices % c.spatial == 0,
      "Config::spatial = {} runs every stage on a group of {} devices, but {} devices make no "
      "whole groups: give a multiple of {} devices",
      c.spatial, c.spatial, devices, c.spatial);
  const int64_t multiple = model.slab_multiple;
  const int most = spatial::most_slabs(depth, multiple);
  if (most < c.spatial) {
    // A slab of several planes: the model's poolings ask for them.
    const std::string why = multiple > 1 ? fmt::format(" with model {}", c.model) : std::string();
    TANDEM_CHECK(
        false,
        "Config::volume = {}{} and Config::spatial = {}: {} slabs of at least {} plane{} need a "
        "depth "
        "of at least {}; use Config::volume = {} or more{}",
        depth, why, c.spatial, c.spatial, multiple, multiple == 1 ? "" : "s", c.spatial * multiple,
        c.spatial * multiple,
        most >= 1 ? fmt::format(", or Config::spatial = {} or fewer", most) : std::string());
  }
  return devices / c.spatial;
}

runtime::OptimizerFactory make_optimizer(const Config& c) {
  TANDEM_CHECK(c.lr > 0, "Config::lr must be positive, not {}", c.lr);
  if (c.optimizer == "adam") {
    return
        [lr = c.lr](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
          return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
        };
  }
  if (c.optimizer == "sgd") {
    TANDEM_CHECK(c.momentum >= 0 && c.momentum < 1, "Config::momentum must be in [0, 1), not {}",
                 c.momentum);
    return [lr = c.lr, m = c.momentum](
               std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr).momentum(m));
    };
  }
  TANDEM_CHECK(false, "unknown optimizer '{}'; use adam or sgd", c.optimizer);
}

// --resume takes folders: a file there is most likely a state dict meant for --init-from.
void check_resume_path(const std::string& resume) {
  if (resume.empty()) return;
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(resume, ec);
  TANDEM_CHECK(
      std::filesystem::exists(status),
      "Config::resume = {}: no such folder; give the save folder of an earlier run (its latest "
      "checkpoint) or one step-N checkpoint in it",
      resume);
  TANDEM_CHECK(
      std::filesystem::is_directory(status),
      "Config::resume = {}: that is not a folder; Config::resume takes a save folder or one step-N "
      "checkpoint in it and continues that run (optimizer and step included); to start "
      "a new run from the parameters of a state dict file, give it to Config::init_from",
      resume);
}

// A save folder that holds checkpoints belongs to another run unless this one continues it:
// saving into it would mix the two runs' checkpoints, or replace the other's without a word.
void check_save_dir(const Config& c) {
  TANDEM_CHECK(!c.overwrite || !c.save_dir.empty(),
               "Config::overwrite replaces the checkpoints of Config::save_dir, but no "
               "Config::save_dir is given");
  if (c.save_dir.empty() || c.overwrite || c.eval_only || c.plan_only) return;
  const std::vector<std::string> held = checkpoint::list_checkpoints(c.save_dir);
  if (held.empty()) return;
  if (!c.resume.empty()) {
    // The folder --resume continues: the save folder it names, or the one that holds the
    // step-N checkpoint it names.
    std::error_code ec;
    const std::filesystem::path from =
        std::filesystem::canonical(checkpoint::resolve_checkpoint(c.resume), ec);
    if (!ec && std::filesystem::equivalent(from.parent_path(), c.save_dir, ec)) return;
  }
  std::vector<std::string> names;
  for (const std::string& h : held) names.push_back(std::filesystem::path(h).filename().string());
  TANDEM_CHECK(false,
               "Config::save_dir = {} holds checkpoints of another run ({}); give Config::resume = "
               "{} to continue "
               "that run, Config::overwrite to replace its checkpoints with this run's, or another "
               "Config::save_dir",
               c.save_dir, fmt::join(names, ", "), c.save_dir);
}

}  // namespace

Trainer::Trainer(Config config, std::shared_ptr<transport::Transport> transport,
                 const OnceForTheJob& once)
    : config_(std::move(config)) {
  check_options();
  // The data first: the built-in models take their input size from its samples.
  source_ = make_source(config_, model_needs(config_));
  check_input_fits(config_, *source_, machine_memory_bytes());
  torch::manual_seed(config_.seed);  // parameter initialization
  start(make_model(config_, source_->input_shape()), std::move(transport), once);
}

Trainer::Trainer(Config config, graph::Model model, std::unique_ptr<Source> source,
                 std::shared_ptr<transport::Transport> transport, const OnceForTheJob& once)
    : config_(std::move(config)), source_(std::move(source)) {
  TANDEM_CHECK(source_ != nullptr, "Trainer: the model of one's own needs a Source, not null");
  check_options();
  check_input_fits(config_, *source_, machine_memory_bytes());
  start(std::move(model), std::move(transport), once);
}

void Trainer::check_options() const {
  const Config& c = config_;
  TANDEM_CHECK(c.batch >= 1, "Config::batch must be at least 1, not {}", c.batch);
  TANDEM_CHECK(c.microbatches <= c.batch,
               "{} micro-batches cannot be cut from a batch of {} samples: use at most {} "
               "micro-batches or a larger Config::batch",
               c.microbatches, c.batch, c.batch);
  TANDEM_CHECK(c.lr_schedule == "cosine" || c.lr_schedule == "constant",
               "Config::lr_schedule = {} is unknown; use cosine or constant", c.lr_schedule);
  TANDEM_CHECK(c.epochs >= 1 || c.steps > 0, "give Config::epochs >= 1 or Config::steps > 0");
  TANDEM_CHECK(c.init_from.empty() || c.resume.empty(),
               "Config::init_from and Config::resume exclude each other: Config::resume continues "
               "a run (parameters, "
               "optimizer, step), Config::init_from starts a new one from parameters");
  check_resume_path(c.resume);
  check_save_dir(c);
}

void Trainer::start(graph::Model model, std::shared_ptr<transport::Transport> transport,
                    const OnceForTheJob& once) {
  const Config& c = config_;
  runtime::PipelineOptions po;
  po.devices = parse_devices(c.devices, c.threads_per_device);
  po.schedule = c.schedule;
  po.microbatches = c.microbatches;
  po.virtual_stages = c.virtual_stages;
  po.replicas = c.replicas;
  po.seed = c.seed;
  po.recompute = c.recompute;
  po.lend_idle_cores = c.lend_idle_cores;
  // A run that only plans trains nothing: the budget is what the plan is checked against.
  po.device_memory = c.plan_only ? 0 : c.device_memory;
  po.log_placement = c.log_placement;
  po.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout_s * 1000));
  po.transport = transport;
  // A sample's planes along the slab dimension (the batch dimension aside): the depth.
  const std::vector<int64_t> sample = source_->input_shape();
  const int64_t depth = model.slab_dim >= 1 && model.slab_dim <= static_cast<int>(sample.size())
                            ? sample[static_cast<size_t>(model.slab_dim - 1)]
                            : 0;
  const int groups = spatial_groups(model, c, static_cast<int>(po.devices.size()), depth);
  po.slabs = c.spatial;
  if (c.spatial > 1) po.slab_extent = depth;
  int stages = c.stages > 0 ? c.stages : groups;
  if (!c.balance.empty()) stages = static_cast<int>(c.balance.size());
  // interleaved and zb-v place several stages on each device themselves: V per device, or 2.
  const bool chunked = schedule::places_own_stages(c.schedule);
  if (chunked) {
    const int per_device = schedule::stages_per_device(c.schedule, c.virtual_stages);
    const int want = groups * per_device;
    TANDEM_CHECK(c.stages == 0 || c.stages == want,
                 "{} on {} devices with {} stages per device has {} stages, not {}", c.schedule,
                 groups, per_device, want, c.stages);
    if (c.balance.empty()) stages = want;
  }
  TANDEM_CHECK(c.partition == "parameters" || c.partition == "memory" || c.partition == "fit",
               "Config::partition = {} is unknown; use parameters, memory or fit", c.partition);
  TANDEM_CHECK(
      c.partition != "fit" || c.device_memory > 0,
      "Config::partition = fit chooses the most even compute among the splits whose plan fits "
      "Config::device_memory: give Config::device_memory");
  TANDEM_CHECK(c.balance.empty() || c.partition == "parameters",
               "Config::balance gives the layers per stage and Config::partition = {} computes "
               "them: give one "
               "of the two",
               c.partition);
  TANDEM_CHECK(source_->test_size() == 0 || source_->test_size() >= c.microbatches,
               "the held-out set has {} samples, too few for {} micro-batches: use "
               "Config::microbatches = {} or fewer",
               source_->test_size(), c.microbatches, source_->test_size());
  std::vector<double> planned;  // per stage, when there is a memory plan
  std::string spatial_hint;     // a --spatial that would fit, when the plan does not
  graph::Partition partition;
  const bool given = !c.balance.empty() || c.partition == "parameters";
  if (!c.balance.empty()) partition = graph::partition_by_balance(model, c.balance);
  if (c.balance.empty() && c.partition == "parameters")
    partition = graph::partition_by_parameters(model, stages);
  if (!given || c.plan_only) {
    // A spatial group plans its first device: the largest slab.
    std::vector<DeviceSpec> leads;
    for (int g = 0; g < groups; ++g) leads.push_back(po.devices[g * c.spatial]);
    MemoryPartition m = memory_partition(model, c, stages, leads, transport != nullptr, *source_,
                                         once, given ? &partition : nullptr);
    partition = std::move(m.partition);
    memory_plan_ = std::move(m.plan);
    planned = std::move(m.planned);
    if (c.spatial > 1) memory_plan_ += slab_accounting(model, c, *source_, once, m.bytes);
    // Over the budget: would thinner slabs of the same stages fit? (A model that slabs can
    // cut, its stages one per group or round-robin.)
    if (c.device_memory > 0 && model.slab_dim >= 0 && !chunked &&
        largest_group_bytes(planned, groups) > static_cast<double>(c.device_memory)) {
      const SpatialFit fit = spatial_that_fits(
          model, c, stages, groups, leads, transport != nullptr, *source_, once, partition, depth);
      if (fit.spatial > 0)
        spatial_hint = fmt::format(
            "Config::spatial = {} would plan at most {} per device ({} devices: {} group{} of {}), "
            "within "
            "the budget\n",
            fit.spatial, memory::format_bytes(static_cast<uint64_t>(fit.bytes)),
            groups * fit.spatial, groups, groups > 1 ? "s" : "", fit.spatial);
    }
  }
  if (!chunked && stages != groups) {
    // More stages than devices: stage s on device s mod devices.
    TANDEM_CHECK(stages > groups,
                 "{} stages on {} devices{} leaves devices idle; give as many stages as devices",
                 stages, groups, c.spatial > 1 ? fmt::format(" (groups of {})", c.spatial) : "");
    for (int s = 0; s < stages; ++s) po.stage_device.push_back(s % groups);
  }
  pipeline_ = std::make_unique<runtime::Pipeline>(std::move(model), std::move(partition), po);
  // A bad data file ends the run here, before the first step, on the processes that read it.
  if (pipeline_->needs_input() || pipeline_->needs_target()) source_->load();
  if (!pipeline_->model().input_shape.empty() && pipeline_->needs_input()) {
    // Samples that do not fit the model's declared input are found now, not at the first step.
    const Batch one =
        source_->test_size() > 0 ? source_->test_batch(0, 1) : source_->train_batch(0, 0, 1);
    graph::fit_input(pipeline_->model(), one.input);
  }
  pipeline_->set_optimizer(make_optimizer(c));
  if (!planned.empty() && c.device_memory > 0) {
    const BudgetVerdict v =
        budget_verdict(planned, *pipeline_, c.device_memory, transport != nullptr);
    memory_plan_ += v.line;
    if (!v.fits) memory_plan_ += spatial_hint;
    plan_fits_ = v.fits;
  }
  if (!c.init_from.empty()) checkpoint::init_from(*pipeline_, c.init_from);
  if (transport)
    replica_ = transport->local_devices().front() / static_cast<int>(po.devices.size());
  transport_ = std::move(transport);
  if (!c.resume.empty() && !c.eval_only && !c.plan_only) resume();
  // Damaged samples are an input file that is wrong: found now, not at the first step. Only
  // processes whose stages read the data read it.
  if (!c.plan_only && (pipeline_->needs_input() || pipeline_->needs_target())) source_->load();
}

void Trainer::resume() {
  const int64_t global_batch = static_cast<int64_t>(config_.batch) * config_.replicas;
  const int64_t per_epoch = source_->train_size() / global_batch;
  const int64_t total = total_steps();
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
}

double Trainer::learning_rate(int64_t step) const {
  if (config_.lr_schedule == "constant") return config_.lr;
  const double progress =
      static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total_steps()));
  return config_.lr * 0.5 * (1.0 + std::cos(std::acos(-1.0) * progress));
}

int64_t Trainer::total_steps() const {
  const int64_t global_batch = static_cast<int64_t>(config_.batch) * config_.replicas;
  const int64_t per_epoch = source_->train_size() / global_batch;
  TANDEM_CHECK(per_epoch >= 1, "a global batch of {} is larger than the {} training samples",
               global_batch, source_->train_size());
  return config_.steps > 0 ? config_.steps : per_epoch * config_.epochs;
}

Result Trainer::run(const StepCallback& on_step) {
  const int64_t global_batch = static_cast<int64_t>(config_.batch) * config_.replicas;
  const int64_t per_epoch = source_->train_size() / global_batch;
  const int64_t total = total_steps();
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
  auto save = [&](int64_t done) {
    checkpoint::SaveOptions so;
    so.keep = config_.keep;
    so.world = world_;
    // Removed only now, so that a run that fails before its first save leaves them as they were.
    if (config_.overwrite && !replaced && world_.rank == 0)
      checkpoint::remove_checkpoints(config_.save_dir);
    replaced = true;
    checkpoint::save(
        *pipeline_,
        {done, done / per_epoch, (done % per_epoch) * global_batch, config_.seed, config_.data},
        config_.save_dir, so);
  };
  for (int64_t step = start; step < total; ++step) {
    const int64_t epoch = step / per_epoch;
    const int64_t begin = (step % per_epoch) * global_batch + replica_ * config_.batch;
    Batch b =
        local_batch([&] { return source_->train_batch(epoch, begin, begin + config_.batch); });
    runtime::StepStats s = pipeline_->forward_backward(b.input, b.target, config_.batch);
    // Each replica's loss is the mean over its own samples (equal batches): the step's is theirs.
    if (config_.replicas > 1 && pipeline_->needs_target())
      s.loss = sum_over_replicas({s.loss})[0] / config_.replicas;
    const double lr = learning_rate(step);
    for (int stage : pipeline_->local_stages()) {
      for (auto& group : pipeline_->optimizer(stage)->param_groups()) group.options().set_lr(lr);
    }
    pipeline_->optimizer_step();
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
  r.test_metric = evaluate();
  return r;
}

Batch Trainer::local_batch(const std::function<Batch()>& read) const {
  const bool input = pipeline_->needs_input(), target = pipeline_->needs_target();
  if (!input && !target) return {};
  Batch b = read();
  b.input = input ? graph::fit_input(pipeline_->model(), b.input) : torch::Tensor();
  if (!target) b.target = torch::Tensor();
  return b;
}

std::vector<double> Trainer::sum_over_replicas(const std::vector<double>& mine) {
  // The devices of the loss stage in all replicas form one data-parallel group (with a spatial
  // split, every slab's device in every replica; the first slab's holds the numbers, the
  // others add nothing).
  std::vector<double> values(mine.size(), 0.0);
  if (pipeline_->owns_loss()) values = mine;
  std::vector<torch::Tensor> sums{torch::tensor(values, torch::kFloat64)};
  transport_->all_reduce_sum(transport_->local_devices().front(), sums);
  for (size_t i = 0; i < values.size(); ++i) values[i] = sums[0][i].item<double>();
  return values;
}

double Trainer::evaluate() {
  const int64_t n = source_->test_size();
  double metric = 0;
  int64_t count = 0;
  // Images evaluate in large chunks; volumes ([C,D,H,W] samples) in training-size batches (they
  // are large).
  const bool volumes = source_->input_shape().size() >= 4;
  const int64_t per_step = volumes ? config_.batch : config_.eval_batch;
  const int64_t m = config_.microbatches;
  const int64_t chunk = std::max<int64_t>(per_step, m);
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();  // no held-out set
  TANDEM_ASSERT(n >= m, "checked when the trainer was made");
  const int replicas = config_.replicas;
  for (int64_t begin = 0, end = 0, k = 0; begin < n; begin = end, ++k) {
    end = std::min(n, begin + chunk);
    if (n - end < m) end = n;  // a tail too short for every micro-batch joins this step
    if (k % replicas != replica_) continue;  // another replica scores this step
    Batch b = local_batch([&] { return source_->test_batch(begin, end); });
    runtime::StepStats s = pipeline_->evaluate(b.input, b.target, end - begin);
    metric += s.metric_sum;
    count += s.samples;
  }
  if (replicas > 1 && pipeline_->needs_target()) {
    const std::vector<double> sums = sum_over_replicas({metric, static_cast<double>(count)});
    metric = sums[0];
    count = static_cast<int64_t>(sums[1]);
  }
  return count ? metric / count : 0;
}

}  // namespace tandem::train
