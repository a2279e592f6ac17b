#include "tandem/graph/call_context.h"

namespace tandem::graph {

namespace {
thread_local CallContext current;
thread_local int collectives = 0;  // next_collective_index() of the current ScopedCall

// SplitMix64: a fast, well-mixed 64-bit hash step.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t CallContext::random_key() const {
  uint64_t h = mix(seed);
  h = mix(h ^ static_cast<uint64_t>(step));
  h = mix(h ^ static_cast<uint64_t>(layer));
  return h;
}

const CallContext& current_call() { return current; }

int64_t workspace_bound(uint64_t device_memory) { return static_cast<int64_t>(device_memory / 64); }

int next_collective_index() { return collectives++; }

ScopedCall::ScopedCall(const CallContext& ctx)
    : previous_(current), previous_collectives_(collectives) {
  current = ctx;
  collectives = 0;
}
ScopedCall::~ScopedCall() {
  current = previous_;
  collectives = previous_collectives_;
}

}  // namespace tandem::graph
