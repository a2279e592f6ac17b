#include "flag_words.h"

#include <map>
#include <regex>

namespace tandem::cli {
namespace {

// The option fields whose flag is not their name. tests/cli/flag_words.cmake checks that every
// field a library message names maps to a flag of `tandem train` or `tandem eval`: keep one
// entry per line, as {"Struct::field", "--flag"} ("" for a field without a flag).
const std::map<std::string, std::string>& flags() {
  static const std::map<std::string, std::string> table = {
      {"Config::lend_idle_cores", "--idle-cores lend"},
      {"Config::recompute", "--recompute stage"},
      {"Config::comm_timeout_s", "--comm-timeout"},
      {"PipelineOptions::slabs", "--spatial"},
      {"PipelineOptions::microbatches", "--microbatches"},
      {"PipelineOptions::replicas", "--replicas"},
      {"PipelineOptions::comm_timeout", "--comm-timeout"},
      {"SaveOptions::keep", "--keep"},
      {"MlpOptions::width", "--width"},
      {"MlpOptions::blocks", "--blocks"},
      {"Options::virtual_stages", "--virtual-stages"},
      {"Options::microbatches", "--microbatches"},
      {"LoadOptions::output", "--output"},
      {"LoadOptions::loss", "--loss"},
      {"NiftiFolderOptions::test_files", "--test-files"},
      {"NiftiFolderOptions::crop", "--volume"},
      {"MpiTransportOptions::cuda_path", "--mpi-cuda"},
      {"MpiTransportOptions::comm_timeout_s", "--comm-timeout"},
      {"ObserveOptions::trace", "--trace"},
      {"ObserveOptions::timeline", "--timeline"},
      {"ObserveOptions::report", "--report"},
      {"ObserveOptions::tensorboard", "--tensorboard"},
      {"ObserveOptions::trace_steps", "--trace-steps"},
      // Fields the command line fills in itself (no flag): their messages stay as they are.
      {"PipelineOptions::slab_extent", ""},
      {"PipelineOptions::wrap_transport", ""},
      {"MriOptions::held_out_fraction", ""},
  };
  return table;
}

std::string flag_of(const std::string& owner, const std::string& field) {
  const auto it = flags().find(owner + "::" + field);
  if (it != flags().end()) return it->second.empty() ? owner + "::" + field : it->second;
  if (owner != "Config") return owner + "::" + field;
  std::string flag = "--" + field;
  for (char& ch : flag)
    if (ch == '_') ch = '-';
  return flag;
}

}  // namespace

std::string flag_words(const std::string& text) {
  static const std::regex field(R"(\b(Config|[A-Za-z]*Options)::([a-z_]+)( = )?)");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), field);
  size_t done = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.append(text, done, static_cast<size_t>(m.position(0)) - done);
    const std::string flag = flag_of(m[1].str(), m[2].str());
    out += flag;
    if (m[3].matched) out += flag.rfind("--", 0) == 0 ? " " : " = ";
    done = static_cast<size_t>(m.position(0) + m.length(0));
  }
  out.append(text, done, std::string::npos);
  return out;
}

}  // namespace tandem::cli
