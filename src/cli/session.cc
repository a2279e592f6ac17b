#include "session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "common/launcher.h"
#include "flag_words.h"
#include "tandem/common/build_info.h"
#include "tandem/common/cpu_kernels.h"
#include "tandem/train/catalog.h"
#include "tandem/train/verify.h"

namespace tandem::cli {
namespace {

// Prints `what` with the rank prefix and ends the job under MPI with `exit_status`. Before the
// job is joined (a refusal while starting it), the prefix comes from the launcher.
void report(const std::unique_ptr<train::Job>& job, const std::string& what, int exit_status) {
  std::string prefix = job ? job->prefix() : "";
  if (!job && launched_world_size() > 1 && launched_rank() >= 0)
    prefix = fmt::format("[r{}/{}] ", launched_rank(), launched_world_size());
  const std::string message = flag_words(what);  // the library's fields as this command's flags
  std::fprintf(stderr, "%standem: %s\n", prefix.c_str(), message.c_str());
  if (job && job->mpi()) job->abort(message, exit_status);
}

}  // namespace

int report_failure(train::When when) {
  const train::Failure f = train::failure_of(std::current_exception(), when);
  std::cerr << "tandem: " << flag_words(f.message) << "\n";
  return f.status;
}

void print_placement_log(Session& session) {
  const runtime::Pipeline& p = session.trainer->pipeline();
  if (!p.placement_log()) return;
  train::Job& job = *session.job;
  const std::string where = job.mpi() ? fmt::format("r{} ", job.rank()) : std::string();
  const std::vector<std::string> found =
      job.gather(train::pack_places(train::places_of(*p.placement_log(), where)));  // collective
  if (job.rank() != 0) return;
  std::map<int, train::LayerPlaces> all;
  for (const std::string& text : found) train::merge_places(all, train::unpack_places(text));
  std::cout << session.prefix() << "placement log (from execution):\n"
            << train::places_table(p.model(), p.partition(), all) << std::flush;
}

bool Session::main_process() const {
  return trainer->pipeline().owns_loss() && trainer->replica() == 0;
}

void use_cpu_kernels(const std::string& mode) {
  if (mode == "portable") {
    const CpuKernels k = use_portable_cpu_kernels();
    if (!k.portable)
      std::fprintf(stderr, "tandem: warning: %s; results may differ from other machines' bits\n",
                   k.why_not.c_str());
  }
  // After a start again for the kernels: the process that runs the command warns, once.
  warn_if_built_from_older_sources();
}

void warn_if_built_from_older_sources() {
  static bool checked = false;
  if (checked || launched_rank() > 0) return;
  checked = true;
  const BuildInfo build = build_info();
  const std::string why = sources_moved_on(build.source_dir, build.commit);
  if (!why.empty()) std::fprintf(stderr, "tandem: warning: %s\n", why.c_str());
}

int join_job(RunArgs& args, Session& session) {
  train::Config& c = args.config;
  use_cpu_kernels(args.cpu_kernels);  // before any tensor operation and before MPI starts
  try {
    // A number without a unit is bytes: a budget under 1 MiB is most likely a unit left out.
    if (!args.device_memory.empty() &&
        args.device_memory.find_first_not_of("0123456789 ") == std::string::npos &&
        c.device_memory < (uint64_t{1} << 20))
      std::fprintf(stderr,
                   "tandem: warning: --device-memory %s is %s bytes; a unit is probably "
                   "missing (--device-memory %sMiB or %sGiB?)\n",
                   args.device_memory.c_str(), args.device_memory.c_str(),
                   args.device_memory.c_str(), args.device_memory.c_str());
    train::Config joined = c;
    if (args.planned) joined.stages = 0;
    session.job = std::make_unique<train::Job>(joined);
    session.job->agree(c);
  } catch (...) {
    const train::Failure f = train::failure_of(std::current_exception(), train::When::kBeforeWork);
    report(session.job, f.message, f.status);
    return f.status;
  }
  return 0;
}

int start_session(RunArgs& args, Session& session, const std::function<void(const Session&)>& check,
                  const std::function<void(train::Config&, train::Job&)>& prepare) {
  if (const int status = join_job(args, session)) return status;
  try {
    if (prepare) prepare(args.config, *session.job);
    session.trainer = session.job->trainer(args.config);
    if (check) check(session);
  } catch (...) {
    const train::Failure f = train::failure_of(std::current_exception(), train::When::kBeforeWork);
    report(session.job, f.message, f.status);
    return f.status;
  }
  return 0;
}

void print_start(Session& session) {
  train::Trainer& t = *session.trainer;
  train::Job& job = *session.job;
  // Under MPI rank 0 gathers every rank's host (collective), so it prints the table.
  const std::string table = job.mpi() ? t.pipeline().placement_table(job.gather(job.host()))
                                      : t.pipeline().placement_table();
  const std::string prefix = session.prefix();
  if (session.main_process()) std::cout << prefix << "data: " << t.source().describe() << "\n";
  if (job.mpi() ? job.rank() == 0 : session.main_process())
    std::cout << prefix << "placement:\n"
              << table << (t.split().empty() ? "" : prefix + t.split()) << std::flush;
  const auto& devices = t.pipeline().devices();
  // More than one thread was asked for (a count, or auto): say how many, since it decides how
  // products round.
  for (const auto& d : devices)
    if (d.device.is_cpu() && d.threads != 1 && session.main_process()) {
      std::cout << prefix << "threads per cpu device: " << d.threads << "\n";
      break;
    }
  const bool on_gpus = std::any_of(devices.begin(), devices.end(),
                                   [](const DeviceSpec& d) { return d.device.is_cuda(); });
  if (job.mpi() && job.rank() == 0 && on_gpus)
    std::cout << prefix << "CUDA tensors between ranks: " << job.cuda_path() << "\n";
  if (!t.memory_plan().empty() && (job.mpi() ? job.rank() == 0 : session.main_process()))
    std::cout << prefix << "memory plan (per device; layers measured on the CPU on one micro-batch"
              << (on_gpus ? ", so a GPU's own workspaces are not in it" : "") << "):\n"
              << flag_words(t.memory_plan()) << std::flush;
}

int run_guarded(Session& session, const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    // Outside a step's actions too, e.g. the optimizer's state on its first step.
    const train::Failure f =
        train::failure_of(std::current_exception(), train::When::kWhileWorking);
    report(session.job, f.message, f.status);
    return f.status;
  }
}

std::string test_metric_field(const std::string& metric_name, double value) {
  if (std::isnan(value)) return fmt::format("test_{}=none", metric_name);  // no held-out set
  return fmt::format("test_{}={:.4f}", metric_name, value);
}

namespace {
// Whether --model comes with weights of its own (an ONNX file's initializers).
bool model_has_weights(const train::Config& c) {
  try {
    return train::model_kind(c.model).has_weights;
  } catch (const Error&) {
    return false;  // an unknown model: the trainer names the known ones
  }
}

}  // namespace

int check_weights(const std::string& command, const std::string& checkpoint,
                  const train::Config& c) {
  std::error_code ec;
  if (checkpoint.empty() && !model_has_weights(c)) {
    std::fprintf(stderr,
                 "tandem: %s needs --checkpoint (a save folder, a step-N checkpoint or a state "
                 "dict file); only a model from an ONNX file runs without one, with its own "
                 "initializers\n",
                 command.c_str());
    return kExitUsage;
  }
  if (!checkpoint.empty() && !std::filesystem::exists(checkpoint, ec)) {
    std::fprintf(stderr,
                 "tandem: --checkpoint %s: no such file or folder; give a save folder (its latest "
                 "checkpoint), one step-N checkpoint in it, or a state dict file (tandem "
                 "consolidate)\n",
                 checkpoint.c_str());
    return kExitUsage;
  }
  return 0;
}

}  // namespace tandem::cli
