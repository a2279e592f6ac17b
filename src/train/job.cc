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

Job::Job(Config& c) : mpi_(std::make_unique<Mpi>()) {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  host_ = name;
  TANDEM_CHECK(c.transport == "auto" || c.transport == "inprocess" || c.transport == "mpi",
               "Config::transport = {} is unknown; use auto, inprocess or mpi", c.transport);
  const bool launched = launched_by_mpi_launcher() && launched_world_size() > 1;
  const bool use_mpi = c.transport == "mpi" || (c.transport == "auto" && launched);
  TANDEM_CHECK(
      use_mpi || c.mpi_cuda == "auto",
      "Config::mpi_cuda = {} chooses how CUDA tensors go between MPI ranks, but this run has no "
      "ranks: run it under mpirun, or leave Config::mpi_cuda out",
      c.mpi_cuda);
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
  TANDEM_CHECK(c.replicas >= 1, "Config::replicas must be at least 1, not {}", c.replicas);
  TANDEM_CHECK(world_ % c.replicas == 0,
               "{} ranks cannot hold {} replicas: the world size must be stages x replicas", world_,
               c.replicas);
  const int stage_devices = world_ / c.replicas;
  TANDEM_CHECK(
      c.spatial >= 1 && stage_devices % c.spatial == 0,
      "{} ranks with Config::replicas = {} give {} devices per replica, which make no whole groups "
      "of Config::spatial = {}: the world size must be stages x spatial x replicas",
      world_, c.replicas, stage_devices, c.spatial);
  TANDEM_CHECK(c.stages == 0 || c.stages * c.spatial == stage_devices ||
                   schedule::places_own_stages(c.schedule),
               "{} ranks with Config::replicas = {}{} give {} stage devices, but Config::stages is "
               "{}; run with "
               "mpirun -n {}",
               world_, c.replicas,
               c.spatial > 1 ? fmt::format(" and Config::spatial = {}", c.spatial) : "",
               stage_devices / c.spatial, c.stages, c.stages * c.spatial * c.replicas);
  mpi::MpiTransportOptions options;
  options.comm_timeout_s = c.comm_timeout_s;
  options.cuda_path = mpi::parse_cuda_path(c.mpi_cuda);
  // One device per rank. A count (the default) means cpu devices; a list names each rank's.
  if (c.devices.find(':') == std::string::npos) {
    if (c.devices_given) {
      const int asked = static_cast<int>(parse_devices(c.devices, 1).size());
      TANDEM_CHECK(asked == stage_devices,
                   "Config::devices = {} asks for {} devices, but {} ranks with Config::replicas = "
                   "{} give {} (one "
                   "device per rank): run with mpirun -n {}, or leave Config::devices out",
                   c.devices, asked, world_, c.replicas, stage_devices, asked * c.replicas);
    }
    c.devices = std::to_string(stage_devices);
  } else {
    const auto specs = parse_devices(c.devices, 1);
    TANDEM_CHECK(
        static_cast<int>(specs.size()) == stage_devices,
        "Config::devices = {} names {} devices but the job has {} stage devices per replica",
        c.devices, specs.size(), stage_devices);
    options.device = specs[rank_ % stage_devices].device;
  }
  // --threads-per-device auto: the ranks of a node share its cores, so each rank's device gets
  // cores / ranks threads (a count or a list of devices alike), what one process gives each of
  // that many devices. The thread count decides how products round, so the same devices in
  // process and under MPI then compute the same bits, on this machine.
  if (c.threads_per_device == 0) c.threads_per_device = std::max(1, available_cores() / world_);
  mpi::Layout layout{stage_devices, c.replicas, c.spatial};
  auto t = std::make_shared<mpi::MpiTransport>(*mpi_->env, layout, options);
  mpi_->transport = t.get();
  transport_ = t;
#else
  TANDEM_CHECK(c.transport != "mpi", "Config::transport = mpi: this tandem was built without MPI");
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

OnceForTheJob Job::once() {
  if (!mpi()) return nullptr;
  return [this](const std::function<std::string()>& make) {
    return all_gather(rank_ == 0 ? make() : std::string()).front();
  };
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
