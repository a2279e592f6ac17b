#include <iostream>

#include "commands.h"
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
  cmd->add_option("checkpoint", args->checkpoint,
                  "a save folder (its latest checkpoint) or a step-N checkpoint")
      ->required();
  cmd->add_option("-o,--output", args->out, "the .pt file to write")->required();
  return [args]() {
    try {
      const int64_t n = checkpoint::consolidate(args->checkpoint, args->out);
      std::cout << fmt::format("result: tensors={} output={}\n", n, args->out);
      return 0;
    } catch (const Error& e) {
      std::cerr << "tandem: " << e.what() << "\n";
      return kExitFailure;
    } catch (const std::exception& e) {
      std::cerr << "tandem: " << error_message(e) << "\n";
      return kExitFailure;
    }
  };
}

}  // namespace tandem::cli
