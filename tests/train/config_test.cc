// The option table holds every field of Config once, and what is made from it follows each one:
// the description the ranks of an MPI job agree on (Job::agree) changes with every field, every
// option's parser takes its own words and refuses others, and messages name each field by its
// flag.
#include "tandem/train/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/train/options.h"

namespace tandem::train {
namespace {

// The fields declared in `struct Config { ... }` of include/tandem/train/config.h (the tests run
// in the source folder): "<type> <name> = ...;" or "<type> <name>;" at two spaces of indent.
std::vector<std::string> declared_fields() {
  std::ifstream in("include/tandem/train/config.h");
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const size_t begin = all.find("struct Config {");
  const size_t end = all.find("\n};", begin);
  EXPECT_NE(begin, std::string::npos) << "no struct Config in include/tandem/train/config.h";
  const std::string body = all.substr(begin, end - begin);
  const std::regex field(R"(\n  [A-Za-z_:<>0-9]+ ([a-z_0-9]+)(?: = [^;]+)?;)");
  std::vector<std::string> out;
  for (std::sregex_iterator it(body.begin(), body.end(), field), stop; it != stop; ++it)
    out.push_back((*it)[1]);
  return out;
}

TEST(Options, EveryFieldOfConfigIsInTheTableOnce) {
  const std::vector<std::string> fields = declared_fields();
  EXPECT_GE(fields.size(), 50u) << "the pattern found too few fields in config.h";
  std::map<std::string, int> in_table;
  for (const ConfigOption& o : config_options()) ++in_table[o.field];
  for (const std::string& f : fields) EXPECT_EQ(in_table[f], 1) << "Config::" << f;
  EXPECT_EQ(in_table.size(), fields.size()) << "the table has a field that Config has not";
}

// Words each option takes that are not its default (a path, a list, a name for text options).
std::string other_words(const ConfigOption& o, const Config& plain) {
  const std::map<std::string, std::string> text = {
      {"model", "unet3d"},  {"loss", "dice"},         {"output", "y"},
      {"data", "spheres"},  {"data_dir", "d"},        {"devices", "cpu:0,cpu:1"},
      {"balance", "3,4,3"}, {"schedule", "gpipe"},    {"device_memory", "2MiB"},
      {"seed", "7"},        {"save_dir", "s"},        {"resume", "r"},
      {"init_from", "i"},   {"faults", "zero:grad=1"}};
  switch (o.value) {
    case OptionValue::kSwitch:
      return "true";
    case OptionValue::kInteger:
    case OptionValue::kReal:
      return o.get(plain) == "7" ? "8" : "7";  // within every range but dropout's
    case OptionValue::kChoice:
      for (const std::string& c : o.choices)
        if (c != o.get(plain)) return c;
      break;
    case OptionValue::kText:
      return text.at(o.field);
  }
  return "";
}

TEST(Options, TheDescriptionChangesWithEveryField) {
  const Config plain;
  const std::string before = describe(plain);
  for (const ConfigOption& o : config_options()) {
    Config c;
    const std::string words = o.field == "dropout" ? "0.5" : other_words(o, plain);
    o.set(c, words);
    EXPECT_NE(describe(c), before) << o.field << " set to " << words;
    EXPECT_NE(describe(c).find(o.field + "="), std::string::npos) << o.field;
    if (o.agreement == Agreement::kValue && o.field != "normalize" && o.field != "device_memory") {
      EXPECT_EQ(o.get(c), words) << o.field;
    }
  }
  // Paths may differ by node: the ranks agree on whether one is given.
  Config here, there;
  here.save_dir = "/node1/ckpt";
  there.save_dir = "/node2/ckpt";
  EXPECT_EQ(describe(here), describe(there));
}

TEST(Options, EachParserRefusesWordsItDoesNotTake) {
  auto refused = [](const std::string& field, const std::string& words) {
    Config c;
    try {
      config_option(field).set(c, words);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused("microbatches", "0"), "0 is not a whole number from 1 to 1048576");
  EXPECT_EQ(refused("microbatches", "2.5"), "2.5 is not a whole number from 1 to 1048576");
  EXPECT_EQ(refused("dropout", "1"), "1 is not in [0, 0.99]");
  EXPECT_EQ(refused("lr", "fast"), "fast is not a number");
  EXPECT_EQ(refused("partition", "even"), "even is not one of time, parameters, memory, fit");
  EXPECT_EQ(refused("progress", "tqdm"), "tqdm is not one of auto, bar, line, none");
  EXPECT_EQ(refused("seed", "-1"), "-1 is not a whole number from 0 to 18446744073709551615");
  EXPECT_EQ(refused("balance", "3,x"), "'x' is not a positive integer; give a list like 3,4,3");
  EXPECT_EQ(refused("device_memory", "0"),
            "0 gives no memory at all; give a budget such as 2GiB, or leave the option out for "
            "no budget");
  EXPECT_EQ(refused("threads_per_device", "auto"), "accepted");
  EXPECT_EQ(refused("no_such_field", "1"), "Config has no option 'no_such_field'");
}

TEST(Options, MessagesNameFieldsByTheirFlags) {
  EXPECT_EQ(flag_of_field("microbatches"), "--microbatches");
  EXPECT_EQ(flag_of_field("comm_timeout_s"), "--comm-timeout");
  EXPECT_EQ(flag_of_field("lend_idle_cores"), "--idle-cores lend");
  EXPECT_EQ(flag_of_field("faults"), "--inject-fault");
  EXPECT_EQ(flag_of_field("devices_given"), "Config::devices_given");
  for (const ConfigOption& o : config_options())
    if (!o.flag.empty()) {
      EXPECT_EQ(o.flag.rfind("--", 0), 0u) << o.field;
    }
}

TEST(Options, ChoicesHaveTheirWords) {
  EXPECT_EQ(name_of(PartitionBy::kFit), "fit");
  EXPECT_EQ(name_of(TransportKind::kInProcess), "inprocess");
  EXPECT_EQ(name_of(MpiCuda::kStaged), "staged");
  EXPECT_EQ(name_of(OptimizerKind::kSgd), "sgd");
  EXPECT_EQ(name_of(LrSchedule::kConstant), "constant");
  EXPECT_EQ(name_of(trace::Progress::Mode::kNone), "none");
}

}  // namespace
}  // namespace tandem::train
