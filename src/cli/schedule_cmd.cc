#include <fmt/ranges.h>

#include <iostream>

#include "commands.h"
#include "common/output_path.h"
#include "flag_words.h"
#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/schedule/all.h"
#include "tandem/trace/chrome_trace.h"
#include "tandem/trace/svg.h"
#include "tandem/train/observe.h"

namespace tandem::cli {

namespace {
struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 4;
  int microbatches = 8;
  int virtual_stages = 1;
  double forward = 1, backward = 1;
  double input = 0, weight = 0;
  bool lowered = false;
  std::string trace, timeline;
};
// Each registered schedule's name and its line of help.
std::string schedule_help() {
  std::string out;
  for (const std::string& name : schedule::schedule_names())
    out += fmt::format("{}{}: {}", out.empty() ? "" : "\n", name,
                       schedule::schedule_kind(name).summary);
  return out;
}
}  // namespace

Runner add_schedule(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Print a schedule's per-device grid and its simulated bubble.");
  cmd->add_option("--schedule", args->schedule, schedule_help())->capture_default_str();
  cmd->add_option("--stages", args->stages, "pipeline stages (devices, for interleaved and zb-v)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--microbatches", args->microbatches, "micro-batches per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--virtual-stages", args->virtual_stages, "model chunks per device (interleaved)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--forward-cost", args->forward, "simulated cost of one forward")
      ->capture_default_str();
  cmd->add_option("--backward-cost", args->backward, "simulated cost of one backward")
      ->capture_default_str();
  cmd->add_option("--input-cost", args->input,
                  "simulated cost of I (split backward; 0: half of B)");
  cmd->add_option("--weight-cost", args->weight,
                  "simulated cost of W (split backward; 0: half of B)");
  cmd->add_option("--trace", args->trace,
                  "write the simulated timeline as a Chrome trace (1 cost unit = 1 ms)");
  cmd->add_option("--timeline", args->timeline, "write the simulated timeline as an SVG picture");
  cmd->add_flag("--lowered", args->lowered, "also print the grid with its sends and receives");
  return [args]() {
    schedule::Schedule s;
    schedule::Timeline t;
    try {
      if (!args->trace.empty()) check_output_file(args->trace, "--trace");
      if (!args->timeline.empty()) check_output_file(args->timeline, "--timeline");
      schedule::Options o;
      o.stages = args->stages;
      o.microbatches = args->microbatches;
      o.virtual_stages = args->virtual_stages;
      s = schedule::make(args->schedule, o);
      schedule::StageGraph g = schedule::StageGraph::chain(s.num_stages);
      schedule::Schedule low = schedule::lower(s, g);
      schedule::validate(low, g);
      std::cout << schedule::format_grid(s);
      if (args->lowered) std::cout << schedule::format_grid(low);
      schedule::Costs costs = schedule::Costs::uniform(s.num_stages, args->forward, args->backward);
      if (args->input > 0) costs.input.assign(s.num_stages, args->input);
      if (args->weight > 0) costs.weight.assign(s.num_stages, args->weight);
      t = schedule::simulate(s, g, costs);
    } catch (...) {
      return report_failure(train::When::kBeforeWork);
    }
    try {
      trace::Trace tr = train::simulated_trace(s, t);
      if (!args->trace.empty()) write_output_file(args->trace, trace::chrome_trace_text(tr));
      if (!args->timeline.empty()) {
        trace::SvgOptions svg;
        svg.title = fmt::format("{}: {} stages, {} micro-batches (simulated, bubble {:.3f})",
                                s.name, s.num_stages, s.num_microbatches, t.bubble);
        write_output_file(args->timeline, trace::render_svg(tr, svg));
      }
      std::cout << fmt::format(
          "result: schedule={} stages={} devices={} microbatches={} makespan={:.4g} "
          "bubble={:.4f}\n",
          args->schedule, s.num_stages, s.num_devices, s.num_microbatches, t.makespan, t.bubble);
      return 0;
    } catch (...) {
      return report_failure(train::When::kWhileWorking);
    }
  };
}

}  // namespace tandem::cli
