// tandem: train one network split across devices and processes.
#include <torch/version.h>

#include <cstdio>

#include "commands.h"
#include "session.h"
#include "tandem/common/build_info.h"
#include "tandem/common/check.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tandem: train one neural network split across devices and processes, with "
      "pipeline schedules and exact gradients."};
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  app.set_version_flag(
      "--version", fmt::format("tandem {} (LibTorch {})", tandem::describe_build(), TORCH_VERSION));
  auto train = tandem::cli::add_train(app);
  auto schedule = tandem::cli::add_schedule(app);
  auto consolidate = tandem::cli::add_consolidate(app);
  auto eval = tandem::cli::add_eval(app);
  auto export_onnx = tandem::cli::add_export(app);
  auto numerics = tandem::cli::add_numerics(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tandem: %s (see --help)\n", e.what());
    return tandem::cli::kExitUsage;
  }
  // train, eval and numerics check the build once their process is the one that runs the
  // command (it may start again for the portable kernels: session.cc); the others now.
  if (app.got_subcommand("train")) return train();
  if (app.got_subcommand("eval")) return eval();
  if (app.got_subcommand("numerics")) return numerics();
  tandem::cli::warn_if_built_from_older_sources();
  if (app.got_subcommand("consolidate")) return consolidate();
  if (app.got_subcommand("export")) return export_onnx();
  return schedule();
}
