#include "input_fits.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "tandem/memory/bytes.h"
#include "tandem/memory/out_of_memory.h"

namespace tandem::train {

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

void check_input_fits(const Config& c, const Source& source, uint64_t memory) {
  const int64_t sample = source.sample_bytes();
  if (sample <= 0 || memory == 0 || c.microbatches < 1) return;
  const int64_t micro = c.batch / c.microbatches + (c.batch % c.microbatches ? 1 : 0);
  const int64_t samples = c.plan_only ? micro : c.batch;
  // In double: a side of 4096 and a large batch overflow 64 bits.
  const double bytes = static_cast<double>(sample) * static_cast<double>(samples);
  if (bytes <= static_cast<double>(memory)) return;
  const bool volumes = source.input_shape().size() >= 4;  // [C,D,H,W]
  const std::string what = volumes ? fmt::format("Config::volume = {}", c.volume) : "the batch";
  const std::string smaller = volumes
                                  ? (samples > 1 ? "use a smaller Config::volume or Config::batch"
                                                 : "use a smaller Config::volume")
                                  : "use a smaller Config::batch";
  throw memory::DoesNotFit(fmt::format(
      "{} does not fit: {} of {} sample{} takes {} (inputs and targets, before any layer runs), "
      "more than the {} of memory of this machine; {}",
      what, c.plan_only ? "one micro-batch" : "one batch", samples, samples == 1 ? "" : "s",
      memory::format_bytes(static_cast<uint64_t>(std::min(bytes, 1.8e19))),
      memory::format_bytes(memory), smaller));
}

}  // namespace tandem::train
