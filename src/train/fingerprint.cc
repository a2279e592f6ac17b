#include "tandem/train/fingerprint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "trace/crc32c.h"

namespace tandem::train {

namespace {

// One parameter's line of the definition (fingerprint.h), without its name.
std::string parameter_line(const torch::Tensor& parameter) {
  const torch::Tensor t = parameter.detach().to(torch::kCPU).contiguous();
  const uint32_t crc = trace::crc32c(t.data_ptr(), t.numel() * t.element_size(), 0);
  const std::string sizes = t.dim() == 0 ? "-" : fmt::format("{}", fmt::join(t.sizes(), "x"));
  return fmt::format("{} {:08x}", sizes, crc);
}

// The fingerprint of name -> line (sorted by name, as std::map keeps them).
std::string fingerprint_of(const std::map<std::string, std::string>& lines) {
  uint32_t crc = 0;
  for (const auto& [name, line] : lines) crc = trace::crc32c(name + " " + line + "\n", crc);
  return fmt::format("{:08x}", crc);
}

}  // namespace

std::string weights_fingerprint(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::map<std::string, std::string> lines;
  for (const auto& [name, tensor] : named) lines.emplace(name, parameter_line(tensor));
  return fingerprint_of(lines);
}

std::string weights_fingerprint(Job& job, const runtime::Pipeline& pipeline) {
  // Each rank's lines as "<bytes of the name>:<name><line>\n" (a name may hold anything); in
  // process the gather is this one text.
  std::string mine;
  for (const auto& [name, tensor] : pipeline.named_parameters())
    mine += fmt::format("{}:{}{}\n", name.size(), name, parameter_line(tensor));
  std::map<std::string, std::string> lines;
  for (const std::string& text : job.all_gather(mine)) {  // rank order: replica 0, slab 0 first
    for (size_t at = 0; at < text.size();) {
      const size_t colon = text.find(':', at);
      const size_t size = std::stoull(text.substr(at, colon - at));
      const size_t end = text.find('\n', colon + 1 + size);
      lines.emplace(text.substr(colon + 1, size),
                    text.substr(colon + 1 + size, end - colon - 1 - size));
      at = end + 1;
    }
  }
  return fingerprint_of(lines);
}

}  // namespace tandem::train
