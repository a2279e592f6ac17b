#include "run_options.h"

#include <fmt/format.h>

#include <cstdint>

#include "flag_words.h"
#include "tandem/common/check.h"
#include "tandem/train/catalog.h"

namespace tandem::cli {
namespace {

CLI::Option* add_option(CLI::App& cmd, RunArgs& args, const train::ConfigOption& o,
                        const std::string& flag, const std::string& help) {
  using train::OptionValue;
  train::Config& c = args.config;
  // The table's parser, its message after the flag as CLI11 gives a refused value.
  auto set = [&c, o, flag](const std::string& v) {
    try {
      o.set(c, v);
    } catch (const Error& e) {
      throw CLI::ValidationError(flag, e.what());
    }
  };
  CLI::Option* option = nullptr;
  if (o.value == OptionValue::kSwitch) {
    option = cmd.add_flag_callback(
        flag, [set] { set("true"); }, help);
  } else if (o.repeatable) {
    option = cmd.add_option_function<std::vector<std::string>>(
        flag,
        [set](const std::vector<std::string>& values) {
          for (const std::string& v : values) set(v);
        },
        help);
  } else {
    option = cmd.add_option_function<std::string>(flag, set, help);
  }
  switch (o.value) {
    case OptionValue::kInteger: {
      option->type_name("INT");
      const CLI::Range range(static_cast<int64_t>(o.min), static_cast<int64_t>(o.max));
      if (o.choices.empty())
        option->check(range);
      else
        option->type_name("TEXT")->check(CLI::IsMember(o.choices) | range);
      break;
    }
    case OptionValue::kReal:
      option->type_name("FLOAT");
      if (o.min < o.max) option->check(CLI::Range(o.min, o.max));
      break;
    case OptionValue::kChoice:
      option->check(CLI::IsMember(o.choices));
      break;
    case OptionValue::kSwitch:
    case OptionValue::kText:
      break;
  }
  if (o.show_default && o.value != OptionValue::kSwitch) option->default_str(o.get(c));
  // The text as given, for the warning about a unit left out (session.cc).
  if (o.field == "device_memory")
    option->each([&args](const std::string& v) { args.device_memory = v; });
  return option;
}

}  // namespace

CLI::Option* add_config_option(CLI::App& cmd, RunArgs& args, const std::string& field,
                               const std::string& flag, const std::string& help) {
  const train::ConfigOption o = train::config_option(field);
  return add_option(cmd, args, o, flag.empty() ? o.flag : flag, help.empty() ? o.help : help);
}

void add_option_group(CLI::App& cmd, RunArgs& args, train::OptionGroup group) {
  if (group == train::OptionGroup::kModel) cmd.footer("\n" + flag_words(train::catalog_help()));
  for (const train::ConfigOption& o : train::config_options()) {
    if (o.group != group) continue;
    add_option(cmd, args, o, o.flag, o.help);
    if (o.field == "threads_per_device")
      cmd.add_option("--cpu-kernels", args.cpu_kernels,
                     "portable: OpenBLAS's Haswell and ATen's AVX2 kernels on every x86-64 "
                     "machine with AVX2, so the same command gives the same bits on any of them "
                     "| native: the kernels the libraries choose for this processor "
                     "(OPENBLAS_CORETYPE respected), on AVX-512 faster but with other bits than "
                     "elsewhere; --precision bf16 needs native (on AVX-512 or AMX), and its bits "
                     "are then this kind of processor's")
          ->capture_default_str()
          ->envname("TANDEM_CPU_KERNELS")
          ->check(CLI::IsMember({"portable", "native"}));
  }
}

}  // namespace tandem::cli
