#include <filesystem>
#include <iostream>

#include "commands.h"
#include "flag_words.h"
#include "tandem/common/check.h"
#if TANDEM_WITH_ONNX
#include "tandem/onnx/export.h"
#endif

namespace tandem::cli {

Runner add_export(CLI::App& app) {
  struct Args {
    std::string checkpoint, onnx, out;
    std::string graph = "inference";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write an ONNX model with the trained weights of a checkpoint: the same graph, its "
      "initializers (parameters and running statistics) replaced by the checkpoint's.");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "a save folder (its latest checkpoint), a step-N checkpoint or a state dict "
                  "file (tandem consolidate)")
      ->required();
  cmd->add_option("--onnx", args->onnx, "the ONNX model that was trained (tandem train --model)")
      ->required();
  cmd->add_option("-o,--output", args->out, "the .onnx file to write")->required();
  cmd->add_option("--graph", args->graph,
                  "inference: dropout off and batch norm on its running statistics, as any ONNX "
                  "runtime should predict | training: the graph as it was trained")
      ->capture_default_str()
      ->check(CLI::IsMember({"inference", "training"}));
  return [args]() {
    for (const std::string* path : {&args->checkpoint, &args->onnx}) {
      std::error_code ec;
      if (!std::filesystem::exists(*path, ec)) {
        std::cerr << "tandem: " << *path << ": no such file or folder\n";
        return kExitUsage;
      }
    }
#if TANDEM_WITH_ONNX
    try {
      const int64_t n = onnx::export_trained(args->onnx, args->checkpoint, args->out,
                                                  args->graph == "inference");
      std::cout << fmt::format("result: initializers={} output={}\n", n, args->out);
      return 0;
    } catch (...) {
      return report_failure(train::When::kWhileWorking);
    }
#else
    std::cerr << "tandem: this tandem was built without its ONNX part (the ONNX library was "
                 "missing when it was configured): install libonnx-dev (or run scripts/setup) "
                 "and configure and build again\n";
    return kExitUsage;
#endif
  };
}

}  // namespace tandem::cli
