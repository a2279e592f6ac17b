#include <iostream>

#include "commands.h"
#include "tandem/schedule/all.h"

namespace tandem::cli {

namespace {
struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 4;
  int microbatches = 8;
  int virtual_stages = 1;
  double forward = 1, backward = 1;
  bool lowered = false;
};
}  // namespace

Runner add_schedule(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand("schedule", "Print a schedule's per-device grid and its simulated bubble.");
  cmd->add_option("--schedule", args->schedule, "sequential | gpipe | 1f1b | interleaved | zb-h1 | zb-v")
      ->capture_default_str();
  cmd->add_option("--stages", args->stages, "pipeline stages (devices, for interleaved and zb-v)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--microbatches", args->microbatches, "micro-batches per step")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--virtual-stages", args->virtual_stages, "model chunks per device (interleaved)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--forward-cost", args->forward, "simulated cost of one forward")->capture_default_str();
  cmd->add_option("--backward-cost", args->backward, "simulated cost of one backward")->capture_default_str();
  cmd->add_flag("--lowered", args->lowered, "also print the grid with its sends and receives");
  return [args]() {
    try {
      schedule::Options o;
      o.stages = args->stages;
      o.microbatches = args->microbatches;
      o.virtual_stages = args->virtual_stages;
      schedule::Schedule s = schedule::make(args->schedule, o);
      schedule::StageGraph g = schedule::StageGraph::chain(s.num_stages);
      schedule::Schedule low = schedule::lower(s, g);
      schedule::validate(low, g);
      std::cout << schedule::format_grid(s);
      if (args->lowered) std::cout << schedule::format_grid(low);
      schedule::Timeline t =
          schedule::simulate(s, g, schedule::Costs::uniform(s.num_stages, args->forward, args->backward));
      std::cout << fmt::format("result: schedule={} stages={} devices={} microbatches={} makespan={:.4g} bubble={:.4f}\n",
                               args->schedule, s.num_stages, s.num_devices, s.num_microbatches,
                               t.makespan, t.bubble);
      return 0;
    } catch (const Error& e) {
      std::cerr << "tandem: " << e.what() << "\n";
      return kExitUsage;
    }
  };
}

}  // namespace tandem::cli
