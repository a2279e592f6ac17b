// Building a Pipeline: the constructor's steps, in order.
#include <ATen/Parallel.h>

#include <algorithm>
#include <numeric>

#include "memory/cpu_allocator.h"
#include "memory/cuda_stats.h"
#include "pipeline_impl.h"
#include "placement.h"
#include "runtime/worker_pool.h"
#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/schedule/all.h"
#include "tandem/transport/inprocess.h"

namespace tandem::runtime {

Pipeline::Pipeline(graph::Model model, graph::Partition partition, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.model = std::move(model);
  m.partition = std::move(partition);
  m.options = std::move(options);
  m.check_options();
  m.choose_stage_devices();
  m.connect_devices();
  m.make_device_models();
  m.share_cores();
  m.account_memory();
  m.move_parameters();
}

// The flow between stages and the checks of the options that need nothing else.
void Pipeline::Impl::check_options() {
  flow = graph::analyze(model, partition);
  stage_graph.num_stages = partition.num_stages;
  stage_graph.consumers = flow.consumers();
  pipeline_size = static_cast<int>(options.devices.size());
  TANDEM_CHECK(pipeline_size >= 1, "a pipeline needs at least one device");
  slabs = options.slabs;
  TANDEM_CHECK(slabs >= 1, "PipelineOptions::slabs must be at least 1, not {}", slabs);
  TANDEM_CHECK(pipeline_size % slabs == 0,
               "{} devices cannot form groups of {} (PipelineOptions::slabs): give a multiple of "
               "{} devices",
               pipeline_size, slabs, slabs);
  groups = pipeline_size / slabs;
  if (slabs > 1) {
    TANDEM_CHECK(model.slab_dim >= 0,
                 "model '{}' has no volume to cut into slabs (graph::Model::slab_dim is unset): "
                 "a spatial split needs a volumetric model such as conv3d-stack or unet3d",
                 model.name);
    TANDEM_CHECK(options.slab_extent > 0,
                 "a spatial split needs the samples' planes along dimension {} "
                 "(PipelineOptions::slab_extent)",
                 model.slab_dim);
    layout.dim = model.slab_dim;
    layout.extent = options.slab_extent;
    layout.slabs = spatial::split_extent(options.slab_extent, slabs, model.slab_multiple);
  }
  TANDEM_CHECK(options.microbatches >= 1,
               "PipelineOptions::microbatches must be at least 1, not {}", options.microbatches);
  TANDEM_CHECK(options.replicas >= 1, "PipelineOptions::replicas must be at least 1, not {}",
               options.replicas);
}

// Stage -> device, and the training and evaluation schedules.
void Pipeline::Impl::choose_stage_devices() {
  const int stages = partition.num_stages;
  if (!options.stage_device.empty()) {
    TANDEM_CHECK(static_cast<int>(options.stage_device.size()) == stages,
                 "{} stage placements given for {} stages", options.stage_device.size(), stages);
    for (int d : options.stage_device) {
      TANDEM_CHECK(
          d >= 0 &&
                  d<groups, "a stage is placed on device {} but there are {}{}", d, groups, slabs> 1
              ? " device groups"
              : " devices");
    }
    stage_device = options.stage_device;
  }
  train_schedule = build_schedule(options.schedule, options.microbatches);
  stage_device = train_schedule.stage_device;
  eval_schedule = schedule::lower(place_stages(schedule::forward_only(stages, options.microbatches),
                                               stage_graph, stage_device, groups),
                                  stage_graph);
  schedule::validate(eval_schedule, stage_graph);
}

// The devices this process runs (contexts, executors) and the transport between all.
void Pipeline::Impl::connect_devices() {
  // Devices this process runs, and the transport between the
  const int world = pipeline_size * options.replicas;
  if (options.transport) {
    transport = options.transport;
    TANDEM_CHECK(transport->num_devices() == world,
                 "the transport connects {} devices but {} devices x {} replicas = {} are needed",
                 transport->num_devices(), pipeline_size, options.replicas, world);
    for (int g : transport->local_devices()) local.push_back(g % pipeline_size);
    replica = transport->local_devices().front() / pipeline_size;
  } else {
    TANDEM_CHECK(
        options.replicas == 1,
        "{} replicas need one process per replica: run under mpirun with PipelineOptions::replicas",
        options.replicas);
    local.resize(pipeline_size);
    std::iota(local.begin(), local.end(), 0);
  }
  contexts.resize(pipeline_size);
  executors.resize(pipeline_size);
  std::vector<const DeviceContext*> all(pipeline_size, nullptr);
  for (int d : local) {
    contexts[d] = std::make_unique<DeviceContext>(options.devices[d]);
    executors[d] = std::make_unique<Executor>(d, slabs, *contexts[d]);
    all[d] = contexts[d].get();
  }
  if (!transport) {
    transport = std::make_shared<transport::InProcessTransport>(all, options.comm_timeout);
  }
  if (options.wrap_transport) {
    transport = options.wrap_transport(transport);
    TANDEM_CHECK(transport && transport->num_devices() == world,
                 "PipelineOptions::wrap_transport must return a transport of the {} devices it "
                 "was given",
                 world);
  }
}

// The model each local device runs, and the slab groups of a spatial split.
void Pipeline::Impl::make_device_models() {
  // Models: the original on each group's lead, copies on the other local devices of a group.
  device_model.assign(pipeline_size, nullptr);
  std::vector<int> leads_seen;
  copies.reserve(local.size());  // no reallocation: device_model points into it
  for (int d : local) {
    const bool lead =
        std::find(leads_seen.begin(), leads_seen.end(), d / slabs) == leads_seen.end();
    if (lead) {
      leads_seen.push_back(d / slabs);
      device_model[d] = &model;
    } else {
      copies.push_back(graph::copy_model(model));
      device_model[d] = &copies.back();
    }
  }
  if (slabs > 1) {
    slab_groups.resize(pipeline_size);
    for (int d : local) {
      std::vector<int> members;
      for (int j = 0; j < slabs; ++j)
        members.push_back(replica * pipeline_size + (d / slabs) * slabs + j);
      slab_groups[d] = std::make_unique<spatial::Group>(transport.get(), members, d % slabs,
                                                        options.devices[d].device, layout);
    }
  }
}

// BLAS threads and, when asked, cores lent between local CPU devices; the workers.
void Pipeline::Impl::share_cores() {
  // BLAS threads are process-wide: give it the smallest per-device budget so that devices
  // working at once do not each start a pool over all cores (nested pools fight over the same
  // cores). The count is fixed by the devices, never by timing: on some OpenBLAS kernels a
  // product's last bits depend on it. Only with lend_idle_cores (opt-in, not bitwise) do
  // several CPU devices here lend each other their cores while they wait; their pool is then
  // their threads together, no more than the cores this process may use.
  std::vector<int> own(pipeline_size, 0);  // threads of each local CPU device
  int cpu_local = 0, own_sum = 0, narrowest = 0, widest = 0;
  for (int d : local) {
    if (!options.devices[d].device.is_cpu()) continue;
    own[d] = options.devices[d].threads;
    own_sum += own[d];
    narrowest = cpu_local++ ? std::min(narrowest, own[d]) : own[d];
    widest = std::max(widest, own[d]);
  }
  if (cpu_local > 0) set_blas_threads(narrowest);
  // The calling thread, which loads and standardizes the data, computes with the same count as
  // the devices. ATen's count is per thread: a thread takes the last count any thread set when it
  // first computes, so without this the caller's count would be the cores' or a worker's,
  // whichever came first.
  if (!local.empty())
    at::set_num_threads(cpu_local > 0 ? narrowest : options.devices[local[0]].threads);
  if (options.lend_idle_cores && cpu_local > 1) {
    cores =
        std::make_unique<CoreShare>(own, std::max(widest, std::min(own_sum, available_cores())));
    shorten_blas_spin();
  }
  pool = std::make_unique<WorkerPool>(static_cast<int>(local.size()),
                                      [this](int w) { contexts[local[w]]->enter_worker_thread(); });
  if (options.log_placement) placement_log = std::make_unique<PlacementLog>();
}

// Memory accounting and budgets of the local devices.
void Pipeline::Impl::account_memory() {
  // Memory: every CPU allocation is charged to the device whose worker makes it.
  memory::install_cpu_accounting();
  auto& tracker = memory::Tracker::global();
  for (int d : local) {
    const DeviceSpec& spec = options.devices[d];
    tracker.register_device(d, spec.name);
    if (spec.device.is_cpu()) {
      tracker.set_budget(d, options.device_memory);
    } else if (options.device_memory > 0) {
      const double total = static_cast<double>(memory::cuda_total_bytes(spec.device.index()));
      memory::cuda_set_memory_fraction(std::min(1.0, options.device_memory / total),
                                       spec.device.index());
    }
  }
}

// Moves each local stage's parameters to its device on that device's worker, which then owns
// (and is charged for) their memory.
void Pipeline::Impl::move_parameters() {
  optimizers.resize(partition.num_stages);
  auto errors = run_on_workers([this](int w) {
    const int d = local[w];
    const DeviceSpec& spec = options.devices[d];
    memory::ScopedWhere where(d, spec.name);
    torch::NoGradGuard no_grad;
    const graph::Model& own_model = *device_model[d];
    for (int s = 0; s < partition.num_stages; ++s) {
      if (stage_device[s] != d / slabs) continue;
      memory::ScopedWhere phase(s, "parameters", -1);
      auto [b, e] = partition.layers_of(s);
      for (int i = b; i < e; ++i) {
        const auto& module = own_model.layers[i].module;
        if (!module) continue;
        memory::ScopedWhere layer(own_model.layers[i].name);
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

schedule::Schedule Pipeline::Impl::build_schedule(const std::string& name, int microbatches) const {
  schedule::Options o;
  o.stages = partition.num_stages;
  o.microbatches = microbatches;
  o.virtual_stages = options.virtual_stages;
  if (schedule::places_own_stages(name)) {
    // These generators take the device count and place the stages themselves.
    o.stages = groups;
  }
  schedule::Schedule s = schedule::make(name, o);
  TANDEM_CHECK(s.num_stages == partition.num_stages,
               "schedule '{}' on {} devices has {} stages but the partition has {}: give {} stages "
               "(a partition of that many stages)",
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

}  // namespace tandem::runtime
