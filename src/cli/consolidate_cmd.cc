#include <iostream>

#include "commands.h"
#include "common/output_path.h"
#include "flag_words.h"
#include "tandem/checkpoint/state_dict.h"

namespace tandem::cli {

Runner add_consolidate(CLI::App& app) {
  struct Args {
    std::string checkpoint, out;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "consolidate",
      "Write a checkpoint as one state dict of the unsplit model ('<layer>.<param>'), "
      "loadable by tandem --init-from and by Python's torch.load.");
  // --checkpoint as eval and export take it; the positional form stays for older scripts.
  cmd->add_option("--checkpoint,checkpoint", args->checkpoint,
                  "a save folder (its latest checkpoint) or a step-N checkpoint")
      ->required();
  cmd->add_option("-o,--output", args->out, "the .pt file to write")->required();
  // Status 2 for what is wrong before any work (the output path, a missing or damaged
  // checkpoint), 1 when the file cannot be written.
  return [args]() {
    checkpoint::ConsolidatedDict dict;
    try {
      check_output_file(args->out, "-o");
      dict = checkpoint::consolidated_dict(args->checkpoint);
    } catch (...) {
      return report_failure(train::When::kBeforeWork);
    }
    try {
      write_output_file(args->out, std::string_view(dict.bytes.data(), dict.bytes.size()));
    } catch (...) {
      return report_failure(train::When::kWhileWorking);
    }
    std::cout << fmt::format("result: tensors={} output={}\n", dict.tensors, args->out);
    return 0;
  };
}

}  // namespace tandem::cli
