// Whether the samples a run must hold at once can fit at all, from their sizes, before any is
// made: a volume side too large for the machine is refused with the sizes instead of failing
// inside LibTorch's allocator.
#pragma once

#include <cstdint>

#include "tandem/train/config.h"
#include "tandem/train/source.h"

namespace tandem::train {

// The machine's physical memory in bytes (0 when the system does not say).
uint64_t machine_memory_bytes();

// Throws memory::DoesNotFit when the samples the run holds at once, inputs and targets, take
// more than `memory` bytes: one batch when it trains (or evaluates), one micro-batch with
// --plan-only (what the layer measurement reads). That is a lower bound of what the run needs,
// so a run refused here could never have run. Does nothing when the source cannot size its
// samples or `memory` is 0.
void check_input_fits(const Config& c, const Source& source, uint64_t memory);

}  // namespace tandem::train
