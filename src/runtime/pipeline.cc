#include "tandem/runtime/pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "pipeline_impl.h"
#include "placement.h"
#include "tandem/memory/context.h"
#include "tandem/memory/cpu_allocator.h"
#include "tandem/memory/cuda_stats.h"
#include "tandem/memory/tracker.h"
#include "tandem/runtime/worker_pool.h"
#include "tandem/schedule/all.h"
#include "tandem/transport/inprocess.h"

namespace tandem::runtime {

bool Pipeline::Impl::reads_input() const {
  for (int s = 0; s < partition.num_stages; ++s) {
    if (!runs_locally(s)) continue;
    for (const auto& c : flow.inputs[s])
      if (c.from_stage < 0) return true;
  }
  return false;
}

schedule::Schedule Pipeline::Impl::build_schedule(const std::string& name, int microbatches) const {
  schedule::Options o;
  o.stages = partition.num_stages;
  o.microbatches = microbatches;
  o.virtual_stages = options.virtual_stages;
  if (name == "interleaved" || name == "zb-v") {
    // These generators take the device count and place the stages themselves.
    o.stages = groups;
  }
  schedule::Schedule s = schedule::make(name, o);
  TANDEM_CHECK(s.num_stages == partition.num_stages,
               "schedule '{}' on {} devices has {} stages but the partition has {}: give {} stages "
               "(--balance with that many entries)",
               name, groups, s.num_stages, partition.num_stages, s.num_stages);
  if (!options.stage_device.empty()) {
    s = place_stages(s, stage_graph, stage_device, groups);
  } else if (s.num_devices != groups) {
    TANDEM_CHECK(false, "schedule '{}' needs {} devices but {} are given", name, s.num_devices,
                 groups);
  }
  schedule::Schedule lowered = schedule::lower(s, stage_graph);
  schedule::validate(lowered, stage_graph);
  return lowered;
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

Pipeline::Pipeline(graph::Model model, graph::Partition partition, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.model = std::move(model);
  m.partition = std::move(partition);
  m.options = std::move(options);
  m.flow = graph::analyze(m.model, m.partition);
  m.stage_graph.num_stages = m.partition.num_stages;
  m.stage_graph.consumers = m.flow.consumers();
  m.pipeline_size = static_cast<int>(m.options.devices.size());
  TANDEM_CHECK(m.pipeline_size >= 1, "a pipeline needs at least one device");
  m.slabs = m.options.slabs;
  TANDEM_CHECK(m.slabs >= 1, "PipelineOptions::slabs must be at least 1, not {}", m.slabs);
  TANDEM_CHECK(m.pipeline_size % m.slabs == 0,
               "{} devices cannot form groups of {} (PipelineOptions::slabs): give a multiple of "
               "{} devices",
               m.pipeline_size, m.slabs, m.slabs);
  m.groups = m.pipeline_size / m.slabs;
  if (m.slabs > 1) {
    TANDEM_CHECK(m.model.slab_dim >= 0,
                 "model '{}' has no volume to cut into slabs (graph::Model::slab_dim is unset): "
                 "a spatial split needs a volumetric model such as conv3d-stack or unet3d",
                 m.model.name);
    TANDEM_CHECK(m.options.slab_extent > 0,
                 "a spatial split needs the samples' planes along dimension {} "
                 "(PipelineOptions::slab_extent)",
                 m.model.slab_dim);
    m.layout.dim = m.model.slab_dim;
    m.layout.extent = m.options.slab_extent;
    m.layout.slabs = spatial::split_extent(m.options.slab_extent, m.slabs, m.model.slab_multiple);
  }
  TANDEM_CHECK(m.options.microbatches >= 1, "--microbatches must be at least 1, not {}",
               m.options.microbatches);
  TANDEM_CHECK(m.options.replicas >= 1, "--replicas must be at least 1, not {}",
               m.options.replicas);

  // Stage -> device.
  const int stages = m.partition.num_stages;
  if (!m.options.stage_device.empty()) {
    TANDEM_CHECK(static_cast<int>(m.options.stage_device.size()) == stages,
                 "{} stage placements given for {} stages", m.options.stage_device.size(), stages);
    for (int d : m.options.stage_device) {
      TANDEM_CHECK(d >= 0 && d < m.groups, "a stage is placed on device {} but there are {}{}",
                   d, m.groups, m.slabs > 1 ? " device groups" : " devices");
    }
    m.stage_device = m.options.stage_device;
  }
  m.train_schedule = m.build_schedule(m.options.schedule, m.options.microbatches);
  m.stage_device = m.train_schedule.stage_device;
  m.eval_schedule =
      schedule::lower(place_stages(schedule::forward_only(stages, m.options.microbatches),
                                   m.stage_graph, m.stage_device, m.groups),
                      m.stage_graph);
  schedule::validate(m.eval_schedule, m.stage_graph);

  // Devices this process runs, and the transport between them.
  const int world = m.pipeline_size * m.options.replicas;
  if (m.options.transport) {
    m.transport = m.options.transport;
    TANDEM_CHECK(m.transport->num_devices() == world,
                 "the transport connects {} devices but {} devices x {} replicas = {} are needed",
                 m.transport->num_devices(), m.pipeline_size, m.options.replicas, world);
    for (int g : m.transport->local_devices()) m.local.push_back(g % m.pipeline_size);
    m.replica = m.transport->local_devices().front() / m.pipeline_size;
  } else {
    TANDEM_CHECK(m.options.replicas == 1,
                 "{} replicas need one process per replica: run under mpirun with --replicas",
                 m.options.replicas);
    m.local.resize(m.pipeline_size);
    std::iota(m.local.begin(), m.local.end(), 0);
  }
  m.contexts.resize(m.pipeline_size);
  m.executors.resize(m.pipeline_size);
  std::vector<const DeviceContext*> all(m.pipeline_size, nullptr);
  for (int d : m.local) {
    m.contexts[d] = std::make_unique<DeviceContext>(m.options.devices[d]);
    m.executors[d] = std::make_unique<Executor>(d, m.slabs, *m.contexts[d]);
    all[d] = m.contexts[d].get();
  }
  if (!m.transport) {
    m.transport = std::make_shared<transport::InProcessTransport>(all, m.options.comm_timeout);
  }
  if (m.options.wrap_transport) {
    m.transport = m.options.wrap_transport(m.transport);
    TANDEM_CHECK(m.transport && m.transport->num_devices() == world,
                 "PipelineOptions::wrap_transport must return a transport of the {} devices it "
                 "was given",
                 world);
  }
  // Models: the original on each group's lead, copies on the other local devices of a group.
  m.device_model.assign(m.pipeline_size, nullptr);
  std::vector<int> leads_seen;
  m.copies.reserve(m.local.size());  // no reallocation: device_model points into it
  for (int d : m.local) {
    const bool lead = std::find(leads_seen.begin(), leads_seen.end(), d / m.slabs) == leads_seen.end();
    if (lead) {
      leads_seen.push_back(d / m.slabs);
      m.device_model[d] = &m.model;
    } else {
      m.copies.push_back(graph::copy_model(m.model));
      m.device_model[d] = &m.copies.back();
    }
  }
  if (m.slabs > 1) {
    m.slab_groups.resize(m.pipeline_size);
    for (int d : m.local) {
      std::vector<int> members;
      for (int j = 0; j < m.slabs; ++j)
        members.push_back(m.replica * m.pipeline_size + (d / m.slabs) * m.slabs + j);
      m.slab_groups[d] = std::make_unique<spatial::Group>(
          m.transport.get(), members, d % m.slabs, m.options.devices[d].device, m.layout);
    }
  }
  // BLAS threads are process-wide: give it the smallest per-device budget so that devices
  // working at once do not each start a pool over all cores (nested pools fight; measured in
  // DESIGN.md). The count is fixed by the devices, never by timing: on some OpenBLAS kernels a
  // product's last bits depend on it. Only with lend_idle_cores (opt-in, not bitwise) do
  // several CPU devices here lend each other their cores while they wait; their pool is then
  // their threads together, no more than the cores this process may use.
  std::vector<int> own(m.pipeline_size, 0);  // threads of each local CPU device
  int cpu_local = 0, own_sum = 0, narrowest = 0, widest = 0;
  for (int d : m.local) {
    if (!m.options.devices[d].device.is_cpu()) continue;
    own[d] = m.options.devices[d].threads;
    own_sum += own[d];
    narrowest = cpu_local++ ? std::min(narrowest, own[d]) : own[d];
    widest = std::max(widest, own[d]);
  }
  if (cpu_local > 0) set_blas_threads(narrowest);
  if (m.options.lend_idle_cores && cpu_local > 1) {
    m.cores =
        std::make_unique<CoreShare>(own, std::max(widest, std::min(own_sum, available_cores())));
    shorten_blas_spin();
  }
  m.pool = std::make_unique<WorkerPool>(static_cast<int>(m.local.size()), [&m](int w) {
    m.contexts[m.local[w]]->enter_worker_thread();
  });
  if (m.options.log_placement) m.placement_log = std::make_unique<PlacementLog>();
  // Memory: every CPU allocation is charged to the device whose worker makes it.
  memory::install_cpu_accounting();
  auto& tracker = memory::Tracker::global();
  for (int d : m.local) {
    const DeviceSpec& spec = m.options.devices[d];
    tracker.register_device(d, spec.name);
    if (spec.device.is_cpu()) {
      tracker.set_budget(d, m.options.device_memory);
    } else if (m.options.device_memory > 0) {
      const double total = static_cast<double>(memory::cuda_total_bytes(spec.device.index()));
      memory::cuda_set_memory_fraction(std::min(1.0, m.options.device_memory / total),
                                       spec.device.index());
    }
  }
  // Parameters move to their stage's device on that device's worker, which then owns (and is
  // charged for) their memory.
  m.optimizers.resize(stages);
  auto errors = m.run_on_workers([&m](int w) {
    const int d = m.local[w];
    const DeviceSpec& spec = m.options.devices[d];
    memory::ScopedWhere where(d, spec.name);
    torch::NoGradGuard no_grad;
    const graph::Model& model = *m.device_model[d];
    for (int s = 0; s < m.partition.num_stages; ++s) {
      if (m.stage_device[s] != d / m.slabs) continue;
      memory::ScopedWhere phase(s, "parameters", -1);
      auto [b, e] = m.partition.layers_of(s);
      for (int i = b; i < e; ++i) {
        const auto& module = model.layers[i].module;
        if (!module) continue;
        memory::ScopedWhere layer(model.layers[i].name);
        module->to(spec.device);
        if (spec.device.is_cpu()) {
          for (auto& p : module->parameters()) p.set_data(p.data().clone());
          for (auto& buf : module->buffers()) buf.set_data(buf.data().clone());
        }
      }
    }
  });
  if (!errors.empty()) std::rethrow_exception(errors.front());
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

StepStats Pipeline::Impl::run(const torch::Tensor& input, const torch::Tensor& target,
                              int64_t samples, bool training) {
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
  TANDEM_CHECK(target.defined() || !reads_target(),
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
  plan.split_backward = training && schedule::splits_backward(train_schedule);
  plan.slices = slices(batch);
  plan.input = input;
  plan.target = target;
  plan.global_batch = batch * options.replicas;
  plan.first_sample = replica * batch;
  plan.origin = Clock::now();
  plan.placement_log = training ? placement_log.get() : nullptr;
  plan.cores = cores.get();

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
  std::vector<DeviceResult> results(pipeline_size);
  for (int d : local) {
    if (options.devices[d].device.is_cpu()) {
      memory::Tracker::global().reset_peak(d);
    } else {
      memory::cuda_reset_peak(options.devices[d].device.index());
    }
  }
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
  StepStats stats;
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
    stats.loss = r.loss.item<double>() * options.replicas;
    stats.metric_sum = r.metric_sum;
    stats.samples = r.samples;
  }
  return stats;
}

StepStats Pipeline::forward_backward(const torch::Tensor& input, const torch::Tensor& target,
                                     int64_t samples) {
  StepStats s = impl_->run(input, target, samples, /*training=*/true);
  Impl& m = *impl_;
  if (m.slabs > 1) {
    auto errors = m.run_on_workers([&m](int w) { m.sum_into_lead(w); });
    if (!errors.empty()) std::rethrow_exception(errors.front());
  }
  // Across processes: the replicas, and the slabs of a spatial split that run elsewhere.
  const bool remote_slabs = m.slabs > 1 && static_cast<int>(m.local.size()) < m.pipeline_size;
  if (m.options.replicas > 1 || remote_slabs) {
    auto errors = m.run_on_workers([&m](int w) {
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

void Pipeline::set_optimizer(const OptimizerFactory& factory) {
  Impl& m = *impl_;
  for (int s : local_stages()) m.optimizers[s] = factory(m.stage_parameters(s));
}

void Pipeline::optimizer_step() {
  Impl& m = *impl_;
  auto errors = m.run_on_workers([&m](int w) {
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
const spatial::SlabLayout& Pipeline::slab_layout() const { return impl_->layout; }
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
