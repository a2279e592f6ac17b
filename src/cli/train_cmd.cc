#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "planning.h"
#include "run_options.h"
#include "session.h"
#include "tandem/memory/bytes.h"
#include "tandem/trace/progress.h"
#include "tandem/train/fingerprint.h"
#include "tandem/train/observers.h"

namespace tandem::cli {

namespace {
struct TrainArgs {
  RunArgs run;
  train::ObserveOptions observe;
  bool automatic = false;  // --auto
  CLI::App* cmd = nullptr;
};

int run_train(TrainArgs& args) {
  Session session;
  auto outputs = [&args](const Session& s) {
    train::check_outputs(args.observe, *s.trainer, *s.job);
  };
  auto choose = [&](train::Config& c, train::Job& job) {
    if (!args.automatic) return;
    const std::set<std::string> fixed = fixed_fields(*args.cmd);
    const train::Planning p = plan_here(c, job, fixed, /*repeats=*/3);
    require_a_fit(p, c, job, fixed, /*repeats=*/3);
    const train::PlannedRun& best = *p.chosen();
    // Every rank planned from rank 0's costs; agree() proves they chose the same, and the job's
    // transport takes the chosen layout (its --spatial sets the ranks' groups).
    job.agree(best.config);
    job.relayout(best.config);
    if (job.rank() == 0)
      std::cout << fmt::format(
          "{}auto: chose the fastest that fits of {} configurations (costs measured in {:.1f} s): "
          "{}; predicted {:.1f} ms per step, at most {} per device\n",
          job.prefix(), p.runs.size(), p.measure_seconds, best.flags, best.step_seconds * 1000,
          memory::format_bytes(static_cast<uint64_t>(best.peak)));
    args.observe.predicted = train::ObserveOptions::Prediction{
        best.flags, best.step_seconds, best.device_peak, best.device_planned};
    c = best.config;
  };
  args.run.planned = args.automatic;
  if (const int status = start_session(args.run, session, outputs, choose)) return status;
  return run_guarded(session, [&] {
    const train::Config& c = session.trainer->config();
    train::Trainer& trainer = *session.trainer;
    const std::string prefix = session.prefix();
    const bool main_process = session.main_process();
    print_start(session);
    if (c.plan_only) return trainer.plan_fits() ? 0 : kExitOutOfMemory;
    trace::Progress progress(main_process ? c.progress : trace::Progress::Mode::kNone,
                             trainer.total_steps());
    train::Observers observers(args.observe, trainer, *session.job);
    auto on_step = [&](int64_t step, int64_t, const runtime::StepStats& s, double sps) {
      progress.update(step, {{"loss", s.loss}, {"samples/s", sps}});
      observers.after_step(step, s, sps);
    };
    train::Result r = trainer.run(on_step);
    progress.finish();
    r.weights = train::weights_fingerprint(*session.job, trainer.pipeline());  // collective
    const std::vector<train::MemoryPeak> memory =
        train::run_memory(*session.job, trainer.pipeline(), r.peak_bytes);
    observers.finish(r, memory);
    print_placement_log(session);  // collective
    if (main_process) {
      std::string mem;
      for (const train::MemoryPeak& m : memory)
        if (m.peak_bytes) mem += fmt::format(" peak_mem_{}={}", m.label, m.peak_bytes);
      const std::string loss = std::isnan(r.loss) ? "none" : fmt::format("{:.4f}", r.loss);
      std::cout << fmt::format(
          "{}result: steps={} loss={} {} samples_per_s={:.1f} seconds={:.2f}{} weights={}\n",
          prefix, r.steps, loss, test_metric_field(r.metric_name, r.test_metric), r.samples_per_s,
          r.seconds, mem, r.weights);
      if (const auto& predicted = args.observe.predicted) {
        uint64_t measured_peak = 0;
        for (const train::MemoryPeak& m : memory)
          measured_peak = std::max(measured_peak, m.peak_bytes);
        const double peak =
            *std::max_element(predicted->peak_bytes.begin(), predicted->peak_bytes.end());
        const double planned = predicted->planned_bytes.empty()
                                   ? peak
                                   : *std::max_element(predicted->planned_bytes.begin(),
                                                       predicted->planned_bytes.end());
        const int64_t later = std::max<int64_t>(1, r.steps - 1);
        std::cout << fmt::format(
            "{}auto: predicted {:.1f} ms per step and {} (at most {}) on the fullest device; "
            "measured {:.1f} ms per step (median of {} step{}{}) and {}\n",
            prefix, predicted->step_seconds * 1000,
            memory::format_bytes(static_cast<uint64_t>(planned)),
            memory::format_bytes(static_cast<uint64_t>(peak)),
            observers.measured_step_seconds() * 1000, later, later == 1 ? "" : "s",
            r.steps > 1 ? " after the first" : "", memory::format_bytes(measured_peak));
      }
    }
    return 0;
  });
}
}  // namespace

Runner add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model split across devices.");
  using G = train::OptionGroup;
  for (G group : {G::kModel, G::kData, G::kPlacement, G::kRecompute, G::kBatch, G::kOptimizer})
    add_option_group(*cmd, args->run, group);
  cmd->add_option("--trace", args->observe.trace,
                  "write a Chrome trace (Perfetto, chrome://tracing) of the traced steps");
  cmd->add_option("--timeline", args->observe.timeline,
                  "write an SVG timeline of the traced steps");
  cmd->add_option(
      "--report", args->observe.report,
      "write a JSON run report (busy/idle, bubble measured vs predicted, memory, FLOP/s)");
  cmd->add_option(
      "--tensorboard", args->observe.tensorboard,
      "write TensorBoard scalars (loss, samples/s, learning rate, accuracy) into this folder");
  cmd->add_option("--trace-steps", args->observe.trace_steps,
                  "how many steps to trace, after the first (warm-up) step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  add_option_group(*cmd, args->run, G::kRun);
  cmd->add_flag("--auto", args->automatic,
                "plan first (as tandem plan does) and train the fastest layout that fits "
                "--device-memory; the placement options given stay fixed");
  args->cmd = cmd;
  return [args]() { return run_train(*args); };
}

}  // namespace tandem::cli
