// A checkpoint's manifest.json and a shard's record (stage-<S>.json): any text either parses or
// throws tandem::Error; what parses prints back to text that parses to the same manifest.
#include <optional>

#include "tandem/checkpoint/manifest.h"
#include "tandem/common/check.h"

namespace {

template <typename F>
auto or_nothing(F&& parse) -> std::optional<decltype(parse())> {
  try {
    return parse();
  } catch (const tandem::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::checkpoint;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto m = or_nothing([&] { return parse_manifest(text, "manifest.json"); })) {
    const std::string again = to_json_text(*m);
    TANDEM_ASSERT(to_json_text(parse_manifest(again, "again.json")) == again,
                  "a parsed manifest does not print back the same");
  }
  if (auto r = or_nothing([&] { return parse_shard_record(text, "stage-0.json"); })) {
    const std::string again = shard_record_to_json_text(*r);
    TANDEM_ASSERT(shard_record_to_json_text(parse_shard_record(again, "again.json")) == again,
                  "a parsed shard record does not print back the same");
  }
  return 0;
}
