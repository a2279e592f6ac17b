#include <cmath>
#include <iostream>
#include <string>

#include "commands.h"
#include "run_options.h"
#include "session.h"
#include "tandem/trace/progress.h"
#include "tandem/train/fingerprint.h"
#include "tandem/train/observers.h"

namespace tandem::cli {

namespace {
struct TrainArgs {
  RunArgs run;
  train::ObserveOptions observe;
};

int run_train(TrainArgs& args) {
  Session session;
  auto outputs = [&args](const Session& s) {
    train::check_outputs(args.observe, *s.trainer, *s.job);
  };
  if (const int status = start_session(args.run, session, outputs)) return status;
  return run_guarded(session, [&] {
    const train::Config& c = session.trainer->config();
    train::Trainer& trainer = *session.trainer;
    const std::string prefix = session.prefix();
    const bool main_process = session.main_process();
    print_start(session);
    if (c.plan_only) return trainer.plan_fits() ? 0 : kExitOutOfMemory;
    trace::Progress progress(
        main_process ? trace::parse_mode(c.progress) : trace::Progress::Mode::kNone,
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
    }
    return 0;
  });
}
}  // namespace

Runner add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  train::Config& c = args->run.config;
  CLI::App* cmd = app.add_subcommand("train", "Train a model split across devices.");
  add_model_options(*cmd, c);
  add_placement_options(*cmd, args->run);
  add_recompute_option(*cmd, c);
  add_batch_options(*cmd, c);
  cmd->add_option("--epochs", c.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--steps", c.steps, "stop after this many steps (0: run the epochs)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  add_optimizer_options(*cmd, c);
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
  cmd->add_option("--save-dir", c.save_dir,
                  "write checkpoints (sharded per stage, atomic) into this folder");
  cmd->add_option("--save-every", c.save_every, "steps between checkpoints (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--keep", c.keep, "complete checkpoints to keep (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--overwrite", c.overwrite,
                "let this run replace the checkpoints another run left in --save-dir (they are "
                "removed when this run saves its first one)");
  cmd->add_option("--resume", c.resume,
                  "continue the run saved in this folder from its latest complete checkpoint (or "
                  "from a step-N checkpoint folder); a state dict file goes to --init-from");
  cmd->add_option("--init-from", c.init_from,
                  "start from a state dict (tandem consolidate, or torch.save of a dict "
                  "'<layer>.<param>' -> tensor) or a checkpoint");
  cmd->add_flag("--plan-only", c.plan_only,
                "do not train: measure the layers, print the placement and the memory plan of "
                "the split that would run (with --device-memory: whether it fits) and stop; "
                "status 3 when it does not fit");
  cmd->add_flag("--eval-only", c.eval_only,
                "do not train: evaluate on the held-out set (with --init-from) and stop "
                "(tandem eval --checkpoint does the same)");
  cmd->add_option("--progress", c.progress, "auto | bar | line | none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "line", "none"}));
  return [args]() { return run_train(*args); };
}

}  // namespace tandem::cli
