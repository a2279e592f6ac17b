// Counter-based random numbers for the synthetic data and the crop samplers.
//
// Every sample is a pure function of (seed, stream, index): its generator is seeded from
// those three numbers alone, so any sample can be drawn in any order, on any thread, and
// the result never depends on the global torch RNG or on LibTorch's version (all draws,
// Gaussian noise included, come from this file rather than from torch's generators).
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::data {

// SplitMix64's finalizer: a bijection on 64-bit words with good avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One seed per (seed, stream, index). `stream` separates independent uses of the same seed
// (training crops vs held-out crops, for instance).
constexpr uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(mix64(seed) ^ (stream * 0x9e3779b97f4a7c15ULL)) + index);
}

// SplitMix64 generator. Not thread-safe; make one per sample.
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : state_(seed) {}

  uint64_t next_u64() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method with rejection).
  uint64_t below(uint64_t n) {
    for (;;) {
      unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
      uint64_t low = static_cast<uint64_t>(m);
      if (low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }
  // Uniform integer in [lo, hi], lo <= hi.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  bool coin() { return (next_u64() >> 63) != 0; }
  // Standard normal (Box-Muller; the pair's second value is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));  // 1 - u is in (0, 1]
    const double t = 6.283185307179586 * uniform();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace tandem::data
