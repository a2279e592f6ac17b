#include "tandem/train/job.h"

#include <unistd.h>

#include <cstdio>
#include <functional>

#include "common/launcher.h"
#include "tandem/common/device.h"
#include "tandem/schedule/registry.h"
#include "tandem/train/failure.h"

#ifdef TANDEM_WITH_MPI
#include "mpi/environment.h"
#include "mpi/mpi_transport.h"
#endif

namespace tandem::train {

struct Job::Mpi {
#ifdef TANDEM_WITH_MPI
  std::unique_ptr<mpi::Environment> env;
  mpi::MpiTransport* transport = nullptr;
#endif
};

namespace {

// The stage devices of one replica when `world` ranks hold `c`'s layout, one device each.
int stage_devices_of(const Config& c, int world) {
  TANDEM_CHECK(c.replicas >= 1, "Config::replicas must be at least 1, not {}", c.replicas);
  TANDEM_CHECK(world % c.replicas == 0,
               "{} ranks cannot hold {} replicas: the world size must be stages x replicas", world,
               c.replicas);
  const int stage_devices = world / c.replicas;
  TANDEM_CHECK(
      c.spatial >= 1 && stage_devices % c.spatial == 0,
      "{} ranks with Config::replicas = {} give {} devices per replica, which make no whole groups "
      "of Config::spatial = {}: the world size must be stages x spatial x replicas",
      world, c.replicas, stage_devices, c.spatial);
  TANDEM_CHECK(c.stages == 0 || c.stages * c.spatial == stage_devices ||
                   schedule::places_own_stages(c.schedule),
               "{} ranks with Config::replicas = {}{} give {} stage devices, but Config::stages is "
               "{}; run with "
               "mpirun -n {}",
               world, c.replicas,
               c.spatial > 1 ? fmt::format(" and Config::spatial = {}", c.spatial) : "",
               stage_devices / c.spatial, c.stages, c.stages * c.spatial * c.replicas);
  if (c.devices.find(':') == std::string::npos) {
    if (c.devices_given) {
      const int asked = static_cast<int>(parse_devices(c.devices, 1).size());
      TANDEM_CHECK(asked == stage_devices,
                   "Config::devices = {} asks for {} devices, but {} ranks with Config::replicas = "
                   "{} give {} (one "
                   "device per rank): run with mpirun -n {}, or leave Config::devices out",
                   c.devices, asked, world, c.replicas, stage_devices, asked * c.replicas);
    }
  } else {
    const auto specs = parse_devices(c.devices, 1);
    TANDEM_CHECK(
        static_cast<int>(specs.size()) == stage_devices,
        "Config::devices = {} names {} devices but the job has {} stage devices per replica",
        c.devices, specs.size(), stage_devices);
  }
  return stage_devices;
}

}  // namespace

Job::Job(const Config& c) : mpi_(std::make_unique<Mpi>()) {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  host_ = name;
  const bool launched = launched_by_mpi_launcher() && launched_world_size() > 1;
  const bool use_mpi =
      c.transport == TransportKind::kMpi || (c.transport == TransportKind::kAuto && launched);
  TANDEM_CHECK(
      use_mpi || c.mpi_cuda == MpiCuda::kAuto,
      "Config::mpi_cuda = {} chooses how CUDA tensors go between MPI ranks, but this run has no "
      "ranks: run it under mpirun, or leave Config::mpi_cuda out",
      name_of(c.mpi_cuda));
#ifdef TANDEM_WITH_MPI
  if (!use_mpi) {
    TANDEM_CHECK(c.replicas == 1,
                 "Config::replicas = {} needs one process per pipeline: run under mpirun with "
                 "stages x replicas ranks",
                 c.replicas);
    return;
  }
  mpi_->env = std::make_unique<mpi::Environment>();
  rank_ = mpi_->env->rank();
  world_ = mpi_->env->size();
  make_transport(c);
#else
  TANDEM_CHECK(c.transport != TransportKind::kMpi,
               "Config::transport = mpi: this tandem was built without MPI");
  // Under a launcher each rank would otherwise train the whole model on its own.
  TANDEM_CHECK(
      !use_mpi,
      "this process is one of {} ranks started by an MPI launcher, but this tandem was "
      "built without MPI, so every rank would train the whole model alone; build with "
      "-DTANDEM_WITH_MPI=ON, run without the launcher, or pass Config::transport = inprocess to "
      "run each rank on its own on purpose",
      launched_world_size());
#endif
}

void Job::make_transport(const Config& c) {
#ifdef TANDEM_WITH_MPI
  const int stage_devices = stage_devices_of(c, world_);
  mpi::MpiTransportOptions options;
  options.comm_timeout_s = c.comm_timeout_s;
  using CudaPath = mpi::MpiTransportOptions::CudaPath;
  options.cuda_path = c.mpi_cuda == MpiCuda::kStaged   ? CudaPath::kStaged
                      : c.mpi_cuda == MpiCuda::kDirect ? CudaPath::kDirect
                                                       : CudaPath::kAuto;
  // One device per rank: a list names each rank's; a count means cpu devices.
  if (c.devices.find(':') != std::string::npos)
    options.device = parse_devices(c.devices, 1)[rank_ % stage_devices].device;
  mpi::Layout layout{stage_devices, c.replicas, c.spatial};
  spatial_ = c.spatial;
  auto t = std::make_shared<mpi::MpiTransport>(*mpi_->env, layout, options);
  mpi_->transport = t.get();
  transport_ = t;
#else
  (void)c;
#endif
}

void Job::relayout(const Config& config) {
  if (!mpi()) return;
#ifdef TANDEM_WITH_MPI
  stage_devices_of(config, world_);  // refuses a layout the ranks cannot hold, on every rank
  TANDEM_CHECK(transport_.use_count() == 1,
               "the job's transport changes its layout while a trainer still uses it");
  // The old transport's destructor waits for every rank's sends (collective), then the new one
  // is made on every rank (collective).
  mpi_->transport = nullptr;
  transport_.reset();
  make_transport(config);
#endif
}

Config Job::placed(const Config& config) const {
  if (!mpi()) return config;
  // The transport's groups (the gradients' sums, the slabs) follow the layout it was made for:
  // a run of other slabs on it would sum over the wrong ranks.
  TANDEM_CHECK(config.spatial == spatial_,
               "the job's transport was laid out for --spatial {}, not {}: make the job with the "
               "run's configuration, or call Job::relayout with it first",
               spatial_, config.spatial);
  Config c = config;
  const int stage_devices = stage_devices_of(c, world_);
  if (c.devices.find(':') == std::string::npos) c.devices = std::to_string(stage_devices);
  // --threads-per-device auto: the ranks of a node share its cores, so each rank's device gets
  // cores / ranks threads (a count or a list of devices alike), what one process gives each of
  // that many devices. The thread count decides how products round, so the same devices in
  // process and under MPI then compute the same bits, on this machine.
  if (c.threads_per_device == 0) c.threads_per_device = std::max(1, available_cores() / world_);
  return c;
}

Job::~Job() {
  transport_.reset();
#ifdef TANDEM_WITH_MPI
  mpi_->env.reset();
#endif
}

std::string Job::prefix() const {
  return mpi() ? fmt::format("[r{}/{}] ", rank_, world_) : std::string();
}

void Job::agree(const Config& c) { agree(describe(c)); }

void Job::agree(const std::string& settings) {
#ifdef TANDEM_WITH_MPI
  if (!mpi_->transport) return;
  mpi_->transport->agree_on(std::hash<std::string>{}(settings), settings);
#endif
}

std::vector<std::string> Job::gather(const std::string& text) {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) return mpi_->transport->gather_strings(text);
#endif
  return {text};
}

std::vector<std::string> Job::all_gather(const std::string& text) {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) return mpi_->transport->all_gather_strings(text);
#endif
  return {text};
}

std::string Job::cuda_path() const {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) {
    if (mpi_->transport->cuda_direct()) return "GPU to GPU (CUDA-aware MPI)";
    return mpi_->env->cuda_aware() ? "through pinned host memory (Config::mpi_cuda = staged)"
                                   : "through pinned host memory (this MPI is not CUDA-aware)";
  }
#endif
  return "";
}

void Job::barrier() {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) mpi_->transport->barrier();
#endif
}

double Job::clock_offset_us() {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) return mpi_->transport->clock_offset_us();
#endif
  return 0;
}

bool Job::everywhere(bool mine) {
  if (!mpi()) return mine;
  for (const std::string& one : all_gather(mine ? "1" : "0"))
    if (one != "1") return false;
  return true;
}

std::string once_for_the_job(Job* job, const std::function<std::string()>& make) {
  return job ? job->once(make) : make();
}

std::string Job::once(const std::function<std::string()>& make) {
  if (!mpi()) return make();
  return all_gather(rank_ == 0 ? make() : std::string()).front();
}

std::vector<double> Job::sum_over_replicas(const runtime::Pipeline& pipeline,
                                           const std::vector<double>& mine) {
  if (!transport_) return mine;
  // The devices of the loss stage in all replicas form one data-parallel group (with a spatial
  // split, every slab's device in every replica; the first slab's holds the numbers, the
  // others add nothing).
  std::vector<double> values(mine.size(), 0.0);
  if (pipeline.owns_loss()) values = mine;
  std::vector<torch::Tensor> sums{torch::tensor(values, torch::kFloat64)};
  transport_->all_reduce_sum(transport_->local_devices().front(), sums);
  for (size_t i = 0; i < values.size(); ++i) values[i] = sums[0][i].item<double>();
  return values;
}

checkpoint::World Job::checkpoint_world(const runtime::Pipeline& pipeline, int replicas) {
  if (!mpi()) return {};
  return {rank_, world_, pipeline.replica(), replicas, [this] { barrier(); }};
}

std::unique_ptr<Trainer> Job::trainer(const Config& config) {
  return std::make_unique<Trainer>(*this, config);
}

std::unique_ptr<Trainer> Job::trainer(const Config& config, graph::Model model,
                                      std::unique_ptr<Source> source) {
  return std::make_unique<Trainer>(*this, config, std::move(model), std::move(source));
}

int Job::guard(const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (...) {
    const Failure f = failure_of(std::current_exception(), When::kWhileWorking);
    std::fprintf(stderr, "%standem: %s\n", prefix().c_str(), f.message.c_str());
    abort(f.message, f.status);
    return f.status;
  }
}

void Job::abort(const std::string& message, int exit_status) {
#ifdef TANDEM_WITH_MPI
  if (mpi_->transport) mpi_->transport->abort(message, exit_status);
#endif
  if (transport_) transport_->abort(message);
}

}  // namespace tandem::train
