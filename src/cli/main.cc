// tandem: train one network split across devices and processes.
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "session.h"
#include "tandem/common/build_info.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"

namespace {

// Edits (insertions, deletions, substitutions, swaps of neighbours) between two words.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// For a flag that the command does not have: its closest flag ("did you mean --devices?"), when
// one is within a third of its length; else empty.
std::string closest_flag(const CLI::App& app, const std::string& word) {
  if (word.rfind("--", 0) != 0) return "";
  std::string name =
      word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
  const CLI::App* command = app.get_subcommands().empty() ? &app : app.get_subcommands().front();
  std::string best;
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const CLI::Option* option : command->get_options()) {
    for (const std::string& flag : option->get_lnames()) {
      const size_t distance = edit_distance(name, flag);
      if (distance < best_distance) {
        best_distance = distance;
        best = "--" + flag;
      }
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  tandem::keep_freed_memory();
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
  auto predict = tandem::cli::add_predict(app);
  auto verify = tandem::cli::add_verify(app);
  auto plan = tandem::cli::add_plan(app);
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
    // A mistyped flag: the one it most likely meant.
    for (int i = 1; i < argc; ++i) {
      const std::string word = argv[i];
      if (word.rfind("--", 0) != 0) continue;
      const std::string meant = closest_flag(app, word);
      if (!meant.empty() && meant != word.substr(0, word.find('=')))
        std::fprintf(stderr, "tandem: %s: did you mean %s?\n", word.c_str(), meant.c_str());
    }
    return tandem::cli::kExitUsage;
  }
  // train, eval, numerics, predict, verify and plan check the build once their process is the one
  // that runs the command (it may start again for the portable kernels: session.cc); the others
  // now.
  if (app.got_subcommand("train")) return train();
  if (app.got_subcommand("eval")) return eval();
  if (app.got_subcommand("numerics")) return numerics();
  if (app.got_subcommand("predict")) return predict();
  if (app.got_subcommand("verify")) return verify();
  if (app.got_subcommand("plan")) return plan();
  tandem::cli::warn_if_built_from_older_sources();
  if (app.got_subcommand("consolidate")) return consolidate();
  if (app.got_subcommand("export")) return export_onnx();
  return schedule();
}
