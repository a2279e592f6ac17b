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
                                  "virtual_stages", "balance", "stages", "precision"}) {
    const CLI::Option* o = cmd.get_option_no_throw(train::config_option(field).flag);
    if (o && o->count() > 0) fixed.insert(field);
  }
  return fixed;
}

namespace {

// What the planner starts from: `c` as the job places it (under MPI one replica's devices, one
// per rank, and their threads), with one micro-batch where --microbatches was not given (the
// default count need not fit the batch: the search chooses it). The replicas stay as given: they
// set the global batch, which is the user's choice.
train::Config planned_config(const train::Config& c, const train::Job& job,
                             const std::set<std::string>& fixed) {
  train::Config unstaged = c;  // --stages may need a --spatial that the search chooses
  unstaged.stages = 0;
  train::Config base = job.placed(unstaged);
  base.stages = c.stages;
  if (!fixed.count("microbatches")) base.microbatches = 1;
  train::check_config(base);
  return base;
}

// The model and data of `c`, made as the trainer makes them.
train::ModelAndData made_for(const train::Config& c) {
  train::ModelAndData m;
  m.source = train::make_source(c, train::model_needs(c));
  train::check_sample(c, m.source->input_shape());
  torch::manual_seed(c.seed);
  m.model = train::make_model(c, m.source->input_shape());
  return m;
}

}  // namespace

namespace {

// Each run of `p` with the devices and threads `c` gave (the job places them again when it
// runs), so that its command line is the one to type.
train::Planning as_given(train::Planning p, const train::Config& c) {
  for (train::PlannedRun& r : p.runs) {
    r.config.devices = c.devices;
    r.config.devices_given = c.devices_given;
    r.config.threads_per_device = c.threads_per_device;
  }
  return p;
}

}  // namespace

train::Planning plan_here(const train::Config& c, train::Job& job,
                          const std::set<std::string>& fixed, int repeats) {
  const train::Config base = planned_config(c, job, fixed);
  const train::ModelAndData m = made_for(base);
  return as_given(train::plan(base, m.model, *m.source, fixed, repeats, &job), c);
}

namespace {

// The largest volume on the grid of the model of `base` (made by made_for) that fits its budget
// (train::largest_volume).
train::LargestVolume largest_here(const train::Config& base, int64_t grid, train::Job& job,
                                  const std::set<std::string>& fixed, int repeats) {
  return train::largest_volume(
      base, grid,
      [&](int64_t side) {
        train::Config at = base;
        at.volume = static_cast<int>(side);
        return made_for(at);
      },
      fixed, repeats, &job);
}

// "; the largest volume that fits ..." for a model of volumes (nothing for the others), searched
// as --volume max searches it.
std::string largest_that_fits(const train::Config& c, train::Job& job,
                              const std::set<std::string>& fixed, int repeats) {
  const train::Config base = planned_config(c, job, fixed);
  const graph::Model model = made_for(base).model;
  if (model.slab_dim < 0) return "";
  const train::LargestVolume v =
      largest_here(base, std::max<int64_t>(1, model.slab_multiple), job, fixed, repeats);
  const std::string budget = memory::format_bytes(c.device_memory);
  if (v.volume == 0)
    return fmt::format("; no volume of the model's grid fits --device-memory {} either", budget);
  const train::PlannedRun* best = v.planning.chosen();
  return fmt::format(
      "; the largest volume that fits --device-memory {} on these devices is --volume {}{}", budget,
      v.volume, best ? fmt::format(" (the fastest layout there: {})", best->flags) : "");
}

}  // namespace

void require_a_fit(const train::Planning& p, const train::Config& c, train::Job& job,
                   const std::set<std::string>& fixed, int repeats) {
  if (p.chosen()) return;
  double leanest = 0;
  const train::PlannedRun* lean = nullptr;
  for (const train::PlannedRun& r : p.runs)
    if (r.why_not.empty() && (!lean || r.peak < leanest)) {
      lean = &r;
      leanest = r.peak;
    }
  TANDEM_CHECK(lean, "no configuration of the search can run on these devices ({}: {})",
               p.runs.empty() ? "none planned" : p.runs.front().flags,
               p.runs.empty() ? "" : p.runs.front().why_not);
  const double tenth = 0.1 * 1024 * 1024;
  const std::string message = fmt::format(
      "no configuration fits --device-memory {} on these devices: the leanest ({}) plans {} per "
      "device; give --device-memory {:.1f}MiB or more, or more devices",
      memory::format_bytes(c.device_memory), lean->flags,
      memory::format_bytes(static_cast<uint64_t>(leanest)),
      std::ceil(leanest / tenth) * tenth / (1024 * 1024));
  throw memory::DoesNotFit(message + largest_that_fits(c, job, fixed, repeats));
}

namespace {

struct PlanArgs {
  RunArgs run;
  std::string volume;  // --volume: a side, or max
  int top = 10;
  int repeats = 3;
  std::string json;
  CLI::App* cmd = nullptr;
};

// --json FILE: the planning as JSON (nothing where `path` is empty).
void write_json(const std::string& path, const train::Planning& p, const train::Config& c) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << train::planning_json(p, c) << "\n";
  TANDEM_CHECK(out.good(), "--json {}: could not write the file", path);
}

// --volume S: a side in [1, 4096].
int side_of(const std::string& text) {
  size_t used = 0;
  int side = 0;
  try {
    side = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TANDEM_CHECK(used == text.size() && side >= 1 && side <= 4096,
               "--volume {}: give a side from 1 to 4096, or max for the largest that fits", text);
  return side;
}

// --volume max: the largest volume of the model's grid that trains under the budget.
int plan_largest_volume(PlanArgs& args, train::Job& job) {
  const std::set<std::string> fixed = fixed_fields(*args.cmd);
  const train::Config base = planned_config(args.run.config, job, fixed);
  TANDEM_CHECK(base.device_memory > 0,
               "--volume max finds the largest volume under a budget: give --device-memory");
  const train::ModelAndData first = made_for(base);
  TANDEM_CHECK(first.model.slab_dim >= 0, "--volume max: model {} takes no volume; use --model {}",
               base.model, train::one_of(train::models_that(base, [](const train::ModelNeeds& n) {
                 return n.volumes;
               })));
  const int64_t grid = std::max<int64_t>(1, first.model.slab_multiple);
  train::LargestVolume v = largest_here(base, grid, job, fixed, args.repeats);
  v.planning = as_given(std::move(v.planning), args.run.config);
  const bool main = job.rank() == 0;  // under MPI rank 0 prints
  std::vector<std::string> tried;
  for (const auto& [side, fit] : v.tried)
    tried.push_back(fmt::format("{} {}", side, fit ? "fits" : "does not"));
  if (main)
    std::cout << fmt::format("volumes tried on the grid of {} (bytes measured): {}\n", grid,
                             fmt::join(tried, ", "));
  if (v.volume == 0)
    throw memory::DoesNotFit(fmt::format("no volume fits --device-memory {}: {}",
                                         memory::format_bytes(base.device_memory), v.limit));
  train::Config at = base;
  at.volume = static_cast<int>(v.volume);
  if (!main) return 0;
  std::cout << fmt::format("largest volume: {} ({}^3 voxels per sample){}\n", v.volume, v.volume,
                           v.limit.empty() ? "" : "; " + v.limit)
            << train::planning_table(v.planning, at, args.top) << std::flush;
  write_json(args.json, v.planning, at);
  return 0;
}

int run_plan(PlanArgs& args) {
  Session session;
  args.run.planned = true;
  if (const int status = join_job(args.run, session)) return status;
  return run_guarded(session, [&] {
    train::Config& c = args.run.config;
    if (args.volume == "max") return plan_largest_volume(args, *session.job);
    if (!args.volume.empty()) c.volume = side_of(args.volume);
    const std::set<std::string> fixed = fixed_fields(*args.cmd);
    const train::Planning p = plan_here(c, *session.job, fixed, args.repeats);
    if (session.job->rank() == 0) {  // under MPI rank 0 prints
      std::cout << train::planning_table(p, c, args.top) << std::flush;
      write_json(args.json, p, c);
    }
    require_a_fit(p, c, *session.job, fixed, args.repeats);
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
  // --volume takes max here: the largest volume that fits.
  cmd->remove_option(cmd->get_option("--volume"));
  cmd->add_option("--volume", args->volume,
                  "side S of the S^3 input volumes, or max: the largest volume on the model's "
                  "grid that trains on these devices under --device-memory, and its plan");
  cmd->add_option("--top", args->top, "how many of the configurations that fit to list")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--repeats", args->repeats,
                  "timed repetitions of each layer's forward and backward (their mean counts, none "
                  "for more than twice their median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--json", args->json, "write every configuration planned as JSON to this file");
  return [args]() { return run_plan(*args); };
}

}  // namespace tandem::cli
