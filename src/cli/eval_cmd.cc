#include <chrono>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "run_options.h"
#include "session.h"
#include "tandem/checkpoint/load.h"
#include "tandem/train/fingerprint.h"

namespace tandem::cli {

namespace {
namespace fs = std::filesystem;

struct EvalArgs {
  RunArgs run;
  std::string checkpoint;
};

// "<folder>/step-4 (step 4)" for a checkpoint (or the latest of a save folder), "<file> (state
// dict)" for a file. Throws tandem::Error when a folder holds no complete checkpoint.
std::string describe_checkpoint(const std::string& path) {
  if (!fs::is_directory(path)) return fmt::format("{} (state dict)", path);
  const std::string folder = checkpoint::resolve_checkpoint(path);
  return fmt::format("{} (step {})", folder, checkpoint::read_manifest(folder).state.step);
}

int run_eval(EvalArgs& args) {
  if (const int status = check_weights("eval", args.checkpoint, args.run.config)) return status;
  // The trainer loads it (as train --init-from does) and checks names and shapes against the
  // whole model before it copies anything: a checkpoint that does not fit is refused before
  // any work, with status 2.
  args.run.config.init_from = args.checkpoint;
  args.run.config.eval_only = true;
  Session session;
  if (const int status = start_session(args.run, session)) return status;
  return run_guarded(session, [&] {
    train::Trainer& trainer = *session.trainer;
    const std::string prefix = session.prefix();
    const std::string source = args.checkpoint.empty()
                                   ? fmt::format("{} (its initializers)", args.run.config.model)
                                   : describe_checkpoint(args.checkpoint);
    if (session.main_process()) std::cout << prefix << "checkpoint: " << source << "\n";
    print_start(session);
    const auto started = std::chrono::steady_clock::now();
    const double metric = trainer.evaluate();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - started;
    const std::string weights = train::weights_fingerprint(*session.job, trainer.pipeline());
    print_placement_log(session);  // collective
    if (session.main_process()) {
      std::cout << fmt::format("{}result: {} seconds={:.2f} weights={}\n", prefix,
                               test_metric_field(trainer.pipeline().model().metric_name, metric),
                               seconds.count(), weights);
    }
    return 0;
  });
}
}  // namespace

Runner add_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint or state dict on the held-out set, on any devices, partition and "
      "schedule (in process or under mpirun).");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "a save folder (its latest checkpoint), one step-N checkpoint in it, or a state "
                  "dict file (tandem consolidate, or torch.save of a dict '<layer>.<param>' -> "
                  "tensor); optional for an ONNX --model, scored with its own initializers");
  using G = train::OptionGroup;
  for (G group : {G::kModel, G::kData, G::kPlacement, G::kBatch})
    add_option_group(*cmd, args->run, group);
  return [args]() { return run_eval(*args); };
}

}  // namespace tandem::cli
