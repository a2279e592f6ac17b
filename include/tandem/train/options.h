// Every option of a run in one table: one entry per Config field, with its flag, its help, its
// default, its parser and how MPI ranks agree on it. The command line's flags (src/cli), the
// configuration's description and the ranks' agreement (describe, Job::agree) and the words by
// which library messages name a field (Config::batch -> --batch) are all made from it; a test
// checks that every field of Config is in it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tandem/train/config.h"

namespace tandem::train {

// Which options a command takes, in groups.
enum class OptionGroup {
  kModel,      // the model and its shape
  kData,       // the data set and its samples
  kPlacement,  // devices, stages, slabs, schedule, replicas, transport, budget
  kRecompute,  // --recompute
  kBatch,      // batch sizes and the seed
  kOptimizer,  // optimizer and learning rate
  kRun,        // steps, epochs, checkpoints, what to do (train only)
  kVerify,     // faults put into a run (verify only)
  kNone,       // no flag: a field the command line fills in itself
};

enum class OptionValue {
  kSwitch,   // a flag without a value: true when given
  kInteger,  // a whole number in [min, max]
  kReal,     // a number in [min, max]
  kText,     // words the parser reads (a path, a list, a size)
  kChoice,   // one of `choices`
};

// How the ranks of an MPI job agree on an option before they start.
enum class Agreement {
  kValue,        // the same value on every rank
  kWhetherGiven  // given on all or none: a path, which may differ by node
};

struct ConfigOption {
  std::string field;  // the Config field: "comm_timeout_s"
  std::string flag;   // "--comm-timeout"; empty for kNone
  OptionGroup group = OptionGroup::kNone;
  OptionValue value = OptionValue::kText;
  std::string help;
  std::vector<std::string> choices;  // kChoice: the words; numbers may take words too ("auto")
  double min = 0, max = 0;           // kInteger, kReal
  bool repeatable = false;           // given several times, each value is added
  bool show_default = true;          // the help shows get(Config{})
  // How a message names the field: "--recompute stage"; empty: the flag.
  std::string words;
  Agreement agreement = Agreement::kValue;
  // The field's value in the words `set` reads (a switch: "true" or "false").
  std::function<std::string(const Config&)> get;
  // Sets the field from words; throws tandem::Error saying why it cannot (without the flag,
  // which the command line puts before it).
  std::function<void(Config&, const std::string&)> set;
};

// The table, in the order of the command line's help. Built on each call: the help of --model,
// --data and --schedule lists the names registered at that moment.
std::vector<ConfigOption> config_options();

// The entry of `field`; throws tandem::Error for a field not in the table.
ConfigOption config_option(const std::string& field);

// How a message names Config::`field`: the option's words, or its flag; "Config::field" for a
// field without a flag.
std::string flag_of_field(const std::string& field);

}  // namespace tandem::train
