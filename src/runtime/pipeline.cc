#include "tandem/runtime/pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "memory/cuda_stats.h"
#include "pipeline_impl.h"
#include "runtime/worker_pool.h"
#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"
#include "tandem/schedule/all.h"

namespace tandem::runtime {

bool Pipeline::Impl::reads_input() const {
  for (int s = 0; s < partition.num_stages; ++s) {
    if (!runs_locally(s)) continue;
    for (const auto& c : flow.inputs[s])
      if (c.from_stage < 0) return true;
  }
  return false;
}

std::vector<std::pair<int64_t, int64_t>> Pipeline::Impl::slices(int64_t batch) const {
  const int m = options.microbatches;
  TANDEM_CHECK(m <= batch,
               "{} micro-batches cannot be cut from a batch of {} samples; use at most {} "
               "micro-batches or a larger batch",
               m, batch, batch);
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t offset = 0;
  for (int i = 0; i < m; ++i) {
    int64_t size = batch / m + (i < batch % m ? 1 : 0);
    out.emplace_back(offset, size);
    offset += size;
  }
  return out;
}

std::vector<torch::Tensor> Pipeline::Impl::stage_parameters(int stage) const {
  std::vector<torch::Tensor> params;
  auto [b, e] = partition.layers_of(stage);
  for (int i = b; i < e; ++i) {
    for (auto& p : graph::named_parameters(model.layers[i])) params.push_back(p.second);
  }
  return params;
}

Pipeline::~Pipeline() = default;

std::vector<std::exception_ptr> Pipeline::Impl::run_on_workers(
    const std::function<void(int)>& job) {
  std::map<c10::DeviceIndex, std::shared_ptr<c10::Event>> caller;  // by GPU
  for (int d : local) {
    const c10::Device& dev = options.devices[d].device;
    if (dev.is_cuda() && !caller.count(dev.index()))
      caller[dev.index()] = record_on_current_stream(dev);
  }
  std::vector<std::shared_ptr<c10::Event>> done(local.size());
  auto errors = pool->run([&](int w) {
    const c10::Device& dev = options.devices[local[w]].device;
    if (dev.is_cuda()) wait_on_current_stream(dev, caller.at(dev.index()));
    job(w);
    done[w] = contexts[local[w]]->record_ready();
  });
  for (size_t w = 0; w < local.size(); ++w)
    wait_on_current_stream(options.devices[local[w]].device, done[w]);
  return errors;
}

std::vector<std::exception_ptr> Pipeline::Impl::timed_on_workers(
    char kind, const std::function<void(int)>& job) {
  // On a GPU a phase's time is the host's: what it waited for and queued. Only a group's lead
  // has these phases (the others' gradients are summed into its own).
  std::vector<PhaseTiming> by_worker(local.size());
  auto since = [this] {
    return std::chrono::duration<double, std::micro>(Clock::now() - origin).count();
  };
  auto errors = run_on_workers([&](int w) {
    PhaseTiming& t = by_worker[static_cast<size_t>(w)];
    t.device = local[w];
    t.kind = kind;
    t.start_us = since();
    job(w);
    t.end_us = since();
  });
  for (const PhaseTiming& t : by_worker) {
    bool leads = false;
    for (int st = 0; st < partition.num_stages; ++st) leads |= lead(st) == t.device;
    if (leads && t.end_us > t.start_us) step_phases.push_back(t);
  }
  return errors;
}

// A step's tensors against the pipeline: returns the batch size.
int64_t Pipeline::Impl::check_step(const torch::Tensor& input, const torch::Tensor& target,
                                   int64_t samples, bool predicting) const {
  const int64_t batch = input.defined()    ? input.size(0)
                        : target.defined() ? target.size(0)
                                           : samples;
  TANDEM_CHECK(batch >= 1,
               "a step needs its batch: pass the input and the target, or give the number of "
               "samples when this process needs neither");
  TANDEM_CHECK(!input.defined() || !target.defined() || input.size(0) == target.size(0),
               "input and target must have the same number of samples ({} vs {})", input.size(0),
               target.size(0));
  TANDEM_CHECK(samples < 0 || samples == batch,
               "the step was told {} samples but its tensors hold {}", samples, batch);
  TANDEM_CHECK(input.defined() || !reads_input(),
               "this process runs a stage that reads the graph input '{}': pass the input",
               model.input);
  TANDEM_CHECK(predicting || target.defined() || !reads_target(),
               "this process runs the stage that computes the loss: pass the target");
  if (slabs > 1) {
    for (const torch::Tensor* t : {&input, &target}) {
      if (!t->defined()) continue;
      TANDEM_CHECK(t->dim() > layout.dim && t->size(layout.dim) == layout.extent,
                   "the spatial split cuts {} planes along dimension {} into {} slabs, but the "
                   "step's {} has shape [{}]",
                   layout.extent, layout.dim, slabs, t == &input ? "input" : "target",
                   fmt::join(t->sizes(), ","));
    }
  }
  return batch;
}

// What every executor reads for this step.
StepPlan Pipeline::Impl::plan_step(const torch::Tensor& input, const torch::Tensor& target,
                                   int64_t batch, bool training) {
  StepPlan plan;
  plan.models = device_model;
  for (const auto& g : slab_groups) plan.groups.push_back(g.get());
  plan.slabs = slabs;
  plan.layout = &layout;
  plan.flow = &flow;
  plan.partition = &partition;
  plan.lowered = training ? &train_schedule : &eval_schedule;
  plan.stage_device = &stage_device;
  plan.transport = transport.get();
  plan.replica = replica;
  plan.pipeline_size = pipeline_size;
  plan.step = step;
  plan.run = runs++;
  plan.seed = options.seed;
  plan.training = training;
  plan.recompute = options.recompute;
  plan.workspace_bound = options.workspace_bound;
  plan.precision = options.precision;
  plan.split_backward = training && schedule::splits_backward(train_schedule);
  plan.loss_scale = loss_scale;
  plan.slices = slices(batch);
  plan.input = input;
  plan.target = target;
  plan.global_batch = batch * options.replicas;
  plan.first_sample = replica * batch;
  plan.origin = Clock::now();
  plan.placement_log = training ? placement_log.get() : nullptr;
  plan.cores = cores.get();
  plan.skip_backward = &options.skip_backward;
  return plan;
}

// Gradients zeroed (a training step) and every local device's memory peak restarted.
void Pipeline::Impl::prepare_devices(bool training) {
  if (training) {
    for (int s = 0; s < partition.num_stages; ++s) {
      for (int d : local) {
        if (d / slabs != stage_device[s]) continue;
        for (auto& p : device_parameters(d, s)) {
          if (p.grad().defined()) p.grad().zero_();
        }
      }
    }
  }
  for (int d : local) {
    if (options.devices[d].device.is_cpu()) {
      memory::Tracker::global().reset_peak(d);
    } else {
      memory::cuda_reset_peak(options.devices[d].device.index());
    }
  }
}

// Every local executor runs the plan on its worker. On failure the transport is reset for the
// next step and the first error that is not another device's abort is thrown.
std::vector<DeviceResult> Pipeline::Impl::execute(const StepPlan& plan, bool training) {
  std::vector<DeviceResult> results(pipeline_size);
  torch::AutoGradMode grad_mode(training);
  auto errors = run_on_workers([&](int w) {
    const int d = local[w];
    if (slabs > 1) mirror_from_lead(w);
    torch::AutoGradMode worker_grad_mode(training);
    results[d] = executors[d]->run(plan);
  });
  if (!errors.empty()) {
    transport->reset();
    std::exception_ptr first = errors.front();
    for (auto& e : errors) {
      try {
        std::rethrow_exception(e);
      } catch (const transport::Aborted&) {
        continue;
      } catch (...) {
        first = e;
        break;
      }
    }
    std::rethrow_exception(first);
  }
  return results;
}

// The step's loss, metric, memory, in-flight counts and timings from the devices' results.
StepStats Pipeline::Impl::gather_stats(const StepPlan& plan, std::vector<DeviceResult>& results) {
  StepStats stats;
  origin = plan.origin;
  step_phases.clear();
  stats.seconds = std::chrono::duration<double>(Clock::now() - plan.origin).count();
  stats.started_us =
      std::chrono::duration<double, std::micro>(plan.origin.time_since_epoch()).count();
  stats.peak_inflight.assign(partition.num_stages, 0);
  stats.current_bytes.assign(pipeline_size, 0);
  stats.peak_bytes.assign(pipeline_size, 0);
  timings.clear();
  if (slabs > 1) stats.exchanges.resize(pipeline_size);
  for (int d : local) {
    stats.current_bytes[d] = device_bytes(d);
    stats.peak_bytes[d] = device_peak_bytes(d);
    DeviceResult& r = results[d];
    if (slabs > 1) stats.exchanges[d] = std::move(r.exchanges);
    for (auto [s, peak] : r.peak_inflight) stats.peak_inflight[s] = peak;
    timings.insert(timings.end(), r.timings.begin(), r.timings.end());
    if (!r.loss.defined()) continue;
    for (const auto& [mb, l] : r.microbatch_losses) {
      const double v = l.item<double>();
      TANDEM_CHECK(std::isfinite(v),
                   "the loss of step {} is {} in micro-batch {} (samples {}..{} of the batch); "
                   "lower the learning rate or check the data",
                   step, v, mb, plan.slices[mb].first,
                   plan.slices[mb].first + plan.slices[mb].second - 1);
    }
    stats.loss = r.loss.item<double>();
    stats.metric_sum = r.metric_sum;
    stats.samples = r.samples;
  }
  return stats;
}

StepStats Pipeline::Impl::run(const torch::Tensor& input, const torch::Tensor& target,
                              int64_t samples, bool training) {
  const int64_t batch = check_step(input, target, samples);
  const StepPlan plan = plan_step(input, target, batch, training);
  prepare_devices(training);
  std::vector<DeviceResult> results = execute(plan, training);
  return gather_stats(plan, results);
}

StepStats Pipeline::forward_backward(const torch::Tensor& input, const torch::Tensor& target,
                                     int64_t samples) {
  StepStats s = impl_->run(input, target, samples, /*training=*/true);
  Impl& m = *impl_;
  if (m.slabs > 1) {
    auto errors = m.timed_on_workers('G', [&m](int w) { m.sum_into_lead(w); });
    if (!errors.empty()) std::rethrow_exception(errors.front());
  }
  // Across processes: the replicas, and the slabs of a spatial split that run elsewhere.
  const bool remote_slabs = m.slabs > 1 && static_cast<int>(m.local.size()) < m.pipeline_size;
  if (m.options.replicas > 1 || remote_slabs) {
    auto errors = m.timed_on_workers('G', [&m](int w) {
      const int d = m.local[w];
      for (int s = 0; s < m.partition.num_stages; ++s) {
        if (m.lead(s) != d) continue;
        std::vector<torch::Tensor> grads;
        for (auto& p : m.stage_parameters(s)) {
          if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
          grads.push_back(p.grad());
        }
        m.transport->all_reduce_sum(m.replica * m.pipeline_size + d, grads);
      }
    });
    if (!errors.empty()) std::rethrow_exception(errors.front());
  }
  ++m.step;
  return s;
}

StepStats Pipeline::evaluate(const torch::Tensor& input, const torch::Tensor& target,
                             int64_t samples) {
  return impl_->run(input, target, samples, /*training=*/false);
}

Prediction Pipeline::predict(const torch::Tensor& input, int64_t samples) {
  Impl& m = *impl_;
  const int64_t batch = m.check_step(input, torch::Tensor(), samples, /*predicting=*/true);
  StepPlan plan = m.plan_step(input, torch::Tensor(), batch, /*training=*/false);
  plan.predicting = true;
  m.prepare_devices(false);
  std::vector<DeviceResult> results = m.execute(plan, false);
  Prediction p;
  p.stats = m.gather_stats(plan, results);
  p.stats.samples = batch;
  // The last stage's slabs of the output meet on its first slab's device: across processes
  // (MPI, one device per rank) they are sent there.
  const int loss_stage = m.flow.loss_stage;
  const int first = m.stage_device[loss_stage] * m.slabs;
  auto is_local = [&](int d) { return std::count(m.local.begin(), m.local.end(), d) > 0; };
  auto global = [&](int d) { return m.replica * m.pipeline_size + d; };
  auto key = [&](int mb, int slab) {
    return transport::MessageKey{"prediction slab " + std::to_string(slab),
                                 static_cast<int>(m.step),
                                 mb,
                                 false,
                                 loss_stage,
                                 loss_stage,
                                 plan.run};
  };
  for (int j = 1; j < m.slabs; ++j) {
    if (!is_local(first + j) || is_local(first)) continue;
    for (auto& [mb, t] : results[first + j].outputs)
      m.transport->send(global(first + j), global(first), key(mb, j), t, nullptr);
  }
  if (!is_local(first)) return p;
  std::vector<torch::Tensor> slabs;
  for (int j = 0; j < m.slabs; ++j) {
    std::vector<torch::Tensor> parts;
    for (size_t mb = 0; mb < plan.slices.size(); ++mb) {
      const int i = static_cast<int>(mb);
      parts.push_back(is_local(first + j) ? results[first + j].outputs.at(i)
                                          : m.transport->recv(global(first), global(first + j),
                                                              key(i, j), torch::kCPU));
    }
    slabs.push_back(torch::cat(parts, 0));
  }
  p.output = m.slabs == 1 ? slabs.front() : torch::cat(slabs, m.layout.dim);
  return p;
}

void Pipeline::set_optimizer(const OptimizerFactory& factory) {
  Impl& m = *impl_;
  for (int s : local_stages()) m.optimizers[s] = factory(m.stage_parameters(s));
}

void Pipeline::optimizer_step() {
  Impl& m = *impl_;
  auto errors = m.timed_on_workers('O', [&m](int w) {
    const int d = m.local[w];
    memory::ScopedWhere where(d, m.options.devices[d].name);
    for (int s = 0; s < m.partition.num_stages; ++s) {
      if (m.lead(s) != d || !m.optimizers[s]) continue;
      memory::ScopedWhere phase(s, "optimizer", -1);
      CoreShare::Busy busy(m.options.devices[d].device.is_cpu() ? m.cores.get() : nullptr, d);
      m.optimizers[s]->step();
    }
  });
  if (!errors.empty()) std::rethrow_exception(errors.front());
}

void Pipeline::set_loss_scale(double scale) {
  TANDEM_CHECK(std::isfinite(scale) && scale > 0, "a loss scale must be a positive number, not {}",
               scale);
  impl_->loss_scale = scale;
}

bool Pipeline::unscale_gradients() {
  Impl& m = *impl_;
  std::vector<char> finite(m.local.size(), 1);
  auto errors = m.run_on_workers([&m, &finite](int w) {
    const int d = m.local[w];
    memory::ScopedWhere where(d, m.options.devices[d].name);
    std::vector<torch::Tensor> checks;
    for (int s = 0; s < m.partition.num_stages; ++s) {
      if (m.lead(s) != d) continue;
      for (auto& p : m.stage_parameters(s)) {
        if (!p.grad().defined()) continue;
        // In fp32, as GradScaler multiplies by the scale's inverse: exact for a power of two.
        p.mutable_grad().mul_(static_cast<float>(1.0 / m.loss_scale));
        checks.push_back(torch::isfinite(p.grad()).all());
      }
    }
    if (!checks.empty()) finite[w] = torch::stack(checks).all().item<bool>();
  });
  if (!errors.empty()) std::rethrow_exception(errors.front());
  return std::all_of(finite.begin(), finite.end(), [](char f) { return f != 0; });
}

std::vector<std::pair<std::string, torch::Tensor>> Pipeline::stage_named_parameters(
    int stage) const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto [b, e] = impl_->partition.layers_of(stage);
  for (int i = b; i < e; ++i) {
    for (auto& p : graph::named_parameters(impl_->model.layers[i])) out.push_back(p);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> Pipeline::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int s : local_stages()) {
    for (auto& p : stage_named_parameters(s)) out.push_back(p);
  }
  return out;
}

torch::optim::Optimizer* Pipeline::optimizer(int stage) const {
  TANDEM_CHECK(stage >= 0 && stage < impl_->partition.num_stages, "stage {} does not exist", stage);
  return impl_->optimizers[stage].get();
}

void Pipeline::set_step(int64_t step) { impl_->step = step; }

int Pipeline::replica() const { return impl_->replica; }

std::vector<int> Pipeline::local_stages() const {
  std::vector<int> v;
  for (int s = 0; s < impl_->partition.num_stages; ++s)
    if (impl_->runs_locally(s)) v.push_back(s);
  return v;
}

bool Pipeline::owns_loss() const {
  const int l = impl_->lead(impl_->flow.loss_stage);
  return l >= 0 && l % impl_->slabs == 0;
}
int Pipeline::slabs() const { return impl_->slabs; }
int Pipeline::lead_device(int stage) const { return impl_->lead(stage); }
bool Pipeline::needs_input() const { return impl_->reads_input(); }
bool Pipeline::needs_target() const { return impl_->reads_target(); }

const graph::Model& Pipeline::model() const { return impl_->model; }
const graph::Partition& Pipeline::partition() const { return impl_->partition; }
const graph::Flow& Pipeline::flow() const { return impl_->flow; }
const schedule::Schedule& Pipeline::schedule() const { return impl_->train_schedule; }
const std::vector<int>& Pipeline::stage_device() const { return impl_->stage_device; }
const std::vector<DeviceSpec>& Pipeline::devices() const { return impl_->options.devices; }
int64_t Pipeline::step() const { return impl_->step; }
const std::vector<ActionTiming>& Pipeline::last_timings() const { return impl_->timings; }

const std::vector<PhaseTiming>& Pipeline::last_phases() const { return impl_->step_phases; }

uint64_t Pipeline::Impl::device_bytes(int d) const {
  const auto& dev = options.devices[d].device;
  return dev.is_cpu() ? memory::Tracker::global().current(d)
                      : memory::cuda_device_stats(dev.index()).current;
}

uint64_t Pipeline::Impl::device_peak_bytes(int d) const {
  const auto& dev = options.devices[d].device;
  return dev.is_cpu() ? memory::Tracker::global().peak(d)
                      : memory::cuda_device_stats(dev.index()).peak;
}

uint64_t Pipeline::device_bytes(int device) const { return impl_->device_bytes(device); }
uint64_t Pipeline::device_peak_bytes(int device) const { return impl_->device_peak_bytes(device); }

const PlacementLog* Pipeline::placement_log() const { return impl_->placement_log.get(); }

}  // namespace tandem::runtime
