#include "tandem/trace/event.h"

#include <fmt/format.h>

#include "tandem/common/check.h"

namespace tandem::trace {

std::map<int, std::string> device_names(const Trace& trace) {
  std::map<int, std::string> names;
  for (const Span& span : trace.spans) {
    if (span.device_name.empty()) continue;
    auto [it, inserted] = names.emplace(span.device, span.device_name);
    TANDEM_CHECK(inserted || it->second == span.device_name,
                 "device {} is called both \"{}\" and \"{}\" (span \"{}\"); give each device one "
                 "name, or give devices of different ranks different numbers.",
                 span.device, it->second, span.device_name, span.name);
  }
  auto fallback = [&](int device) { names.emplace(device, fmt::format("device {}", device)); };
  for (const Span& span : trace.spans) fallback(span.device);
  for (const Counter& counter : trace.counters) fallback(counter.device);
  return names;
}

}  // namespace tandem::trace
