// tandem plan: the fastest layout that fits, from measured costs (train/planner.h).
#include <cmath>
#include <fstream>
#include <iostream>

#include "commands.h"
#include "planning.h"
#include "run_options.h"
#include "session.h"
#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/train/catalog.h"

namespace tandem::cli {

std::set<std::string> fixed_fields(const CLI::App& cmd) {
  std::set<std::string> fixed;
  for (const std::string field : {"spatial", "microbatches", "schedule", "recompute",
                                  "virtual_stages", "balance", "stages"}) {
    const CLI::Option* o = cmd.get_option_no_throw(train::config_option(field).flag);
    if (o && o->count() > 0) fixed.insert(field);
  }
  return fixed;
}

train::Planning plan_here(const train::Config& c, train::Job& job,
                          const std::set<std::string>& fixed, int repeats) {
  TANDEM_CHECK(!job.mpi(),
               "the planner measures and plans in one process for this machine's CPU devices: "
               "run it without mpirun, then launch the chosen layout");
  // The default micro-batch count need not fit the batch: the search chooses it.
  train::Config base = c;
  if (!fixed.count("microbatches")) base.microbatches = 1;
  train::check_config(base);
  const std::unique_ptr<train::Source> source = train::make_source(base, train::model_needs(base));
  train::check_sample(base, source->input_shape());
  torch::manual_seed(base.seed);
  const graph::Model model = train::make_model(base, source->input_shape());
  return train::plan(base, model, *source, fixed, repeats, &job);
}

void require_a_fit(const train::Planning& p, const train::Config& c) {
  if (p.chosen()) return;
  double leanest = 0;
  const train::PlannedRun* lean = nullptr;
  for (const train::PlannedRun& r : p.runs)
    if (r.why_not.empty() && (!lean || r.peak < leanest)) {
      lean = &r;
      leanest = r.peak;
    }
  TANDEM_CHECK(lean, "no configuration of the search can run on these devices");
  const double tenth = 0.1 * 1024 * 1024;
  throw memory::DoesNotFit(fmt::format(
      "no configuration fits --device-memory {} on these devices: the leanest ({}) plans {} per "
      "device; give --device-memory {:.1f}MiB or more, or more devices",
      memory::format_bytes(c.device_memory), lean->flags,
      memory::format_bytes(static_cast<uint64_t>(leanest)),
      std::ceil(leanest / tenth) * tenth / (1024 * 1024)));
}

namespace {

struct PlanArgs {
  RunArgs run;
  int top = 10;
  int repeats = 3;
  std::string json;
  CLI::App* cmd = nullptr;
};

int run_plan(PlanArgs& args) {
  Session session;
  if (const int status = join_job(args.run, session)) return status;
  return run_guarded(session, [&] {
    const train::Config& c = args.run.config;
    const train::Planning p = plan_here(c, *session.job, fixed_fields(*args.cmd), args.repeats);
    std::cout << train::planning_table(p, c, args.top) << std::flush;
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << train::planning_json(p, c) << "\n";
      TANDEM_CHECK(out.good(), "--json {}: could not write the file", args.json);
    }
    require_a_fit(p, c);
    return 0;
  });
}

}  // namespace

Runner add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Find the fastest layout of the model on the devices that fits --device-memory: every "
      "--spatial, schedule, micro-batch count and --recompute, each layer's bytes and times "
      "measured once; options given stay fixed.");
  args->cmd = cmd;
  using G = train::OptionGroup;
  // train's options, the run's included, so that a train command line plans as it is.
  for (G group :
       {G::kModel, G::kData, G::kPlacement, G::kRecompute, G::kBatch, G::kOptimizer, G::kRun})
    add_option_group(*cmd, args->run, group);
  cmd->add_option("--top", args->top, "how many of the configurations that fit to list")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--repeats", args->repeats,
                  "timed repetitions of each layer's forward and backward (their median counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--json", args->json, "write every configuration planned as JSON to this file");
  return [args]() { return run_plan(*args); };
}

}  // namespace tandem::cli
