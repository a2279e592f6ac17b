// Tick positions and units for a time axis: used by the SVG timeline, usable by any report.
#pragma once

#include <string>
#include <vector>

namespace tandem::trace {

struct TimeUnit {
  std::string name;  // "µs", "ms", "s"
  double us = 1;     // microseconds per unit
};

// The largest of µs, ms, s in which `range_us` is at least 1 (µs for anything shorter).
TimeUnit pick_unit(double range_us);

// Ticks at the multiples inside [begin, end] of a "nice" step (1, 2 or 5 times a power of
// ten): the step whose tick count is closest to `target`. Values are in the units of begin
// and end.
// An empty or reversed range gives {begin}.
std::vector<double> nice_ticks(double begin, double end, int target = 8);

// A tick value in `unit`, without trailing zeros: 2500 µs in ms -> "2.5".
std::string format_tick(double value_us, const TimeUnit& unit);

}  // namespace tandem::trace
