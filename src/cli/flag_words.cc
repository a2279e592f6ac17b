#include "flag_words.h"

#include <cctype>
#include <map>

#include "tandem/train/options.h"

namespace tandem::cli {
namespace {

// The flags of option fields of the library's other structs; Config's are in the option table
// (train/options.h). tests/cli/flag_words_check.py checks that every field a library message
// names maps to a flag of `tandem train` or `tandem eval`: keep one entry per line, as
// {"Struct::field", "--flag"} ("" for a field without a flag).
const std::map<std::string, std::string>& flags() {
  static const std::map<std::string, std::string> table = {
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
  if (owner == "Config") return train::flag_of_field(field);
  const auto it = flags().find(owner + "::" + field);
  if (it != flags().end() && !it->second.empty()) return it->second;
  return owner + "::" + field;
}

}  // namespace

std::string flag_words(const std::string& text) {
  // Each "Owner::field" where Owner is Config or ends in Options and field is [a-z_]+, with the
  // " = " after it when a value follows.
  auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  std::string out;
  size_t done = 0;
  for (size_t at = text.find("::"); at != std::string::npos; at = text.find("::", at + 2)) {
    size_t begin = at;
    while (begin > done && std::isalpha(static_cast<unsigned char>(text[begin - 1]))) --begin;
    const std::string owner = text.substr(begin, at - begin);
    const bool options = owner.size() >= 7 && owner.compare(owner.size() - 7, 7, "Options") == 0;
    if ((owner != "Config" && !options) || (begin > 0 && word(text[begin - 1]))) continue;
    size_t end = at + 2;
    while (end < text.size() &&
           (std::islower(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    if (end == at + 2 || (end < text.size() && word(text[end]))) continue;
    const std::string flag = flag_of(owner, text.substr(at + 2, end - at - 2));
    out.append(text, done, begin - done);
    out += flag;
    if (text.compare(end, 3, " = ") == 0) {
      out += flag.rfind("--", 0) == 0 ? " " : " = ";
      end += 3;
    }
    done = end;
  }
  out.append(text, done, std::string::npos);
  return out;
}

}  // namespace tandem::cli
