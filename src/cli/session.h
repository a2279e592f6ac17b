// One process's part of a `tandem train` or `tandem eval` run: how it joined the job and its
// trainer, with the error handling both commands share.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "run_options.h"
#include "tandem/train/job.h"
#include "tandem/train/trainer.h"

namespace tandem::cli {

struct Session {
  std::unique_ptr<train::Job> job;
  std::unique_ptr<train::Trainer> trainer;

  // "[r2/4] " under MPI, "" in process.
  std::string prefix() const { return job->prefix(); }
  // Information comes from the process that owns the loss, in replica 0; warnings and errors
  // from every process.
  bool main_process() const;
};

// With `mode` "portable", sets up the portable CPU kernels (which may start this program again:
// call before any tensor operation and before MPI starts) and warns where it cannot; "native"
// leaves the libraries' choice alone. Then warn_if_built_from_older_sources().
void use_cpu_kernels(const std::string& mode);

// Warns (once per process, from rank 0 of an MPI launch) when this program was built from
// another commit than its source folder is at now: a build that failed, or one not run after a
// pull, leaves the older program in place, which then gives the older code's results.
void warn_if_built_from_older_sources();

// Parses the text options of `args` into its config, joins the job (MPI or in process), checks
// that every rank runs the same configuration and builds the trainer. Returns 0, or prints
// why it could not (with the rank prefix, ending the job under MPI) and returns the exit
// status: kExitUsage for a bad configuration, kExitOutOfMemory when a budget is too small.
// `check`, when given, runs on the built session and refuses it by throwing Error (kExitUsage).
// The same up to the trainer: the options parsed and the job joined (session.trainer stays
// null), for a command that makes its trainers itself.
// `prepare`, when given, runs on the joined job before the trainer is made and may change the
// configuration (train --auto sets the planner's choice); what it throws is refused as `check`'s.
int join_job(RunArgs& args, Session& session);
int start_session(RunArgs& args, Session& session,
                  const std::function<void(const Session&)>& check = nullptr,
                  const std::function<void(train::Config&, train::Job&)>& prepare = nullptr);

// Prints the data set and the placement table (with ranks and hosts under MPI). Collective
// under MPI: every rank calls it.
void print_start(Session& session);

// With --log-placement: the devices every layer's forward and backward ran on, as recorded
// while they ran, in one table printed by rank 0 with every rank's records ("r2 cpu:0" under
// MPI). Collective under MPI: every rank calls it.
void print_placement_log(Session& session);

// Runs `body` and returns its status. An error it throws is printed with the rank prefix and
// ends the job under MPI; the status is then kExitOutOfMemory for a device over its budget,
// kExitFailure otherwise.
int run_guarded(Session& session, const std::function<int()>& body);

// The weights `command` (eval, predict) applies: `checkpoint` (a save folder, a step-N
// checkpoint, a state dict file), or an ONNX model's own initializers when it is empty. Returns 0,
// or prints why they are missing and returns kExitUsage.
int check_weights(const std::string& command, const std::string& checkpoint,
                  const train::Config& c);

// "test_accuracy=0.9729": the key and precision of the held-out metric on every result line;
// "test_mse=none" without a held-out set (NaN).
std::string test_metric_field(const std::string& metric_name, double value);

}  // namespace tandem::cli
