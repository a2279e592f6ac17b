#include "trace/time_axis.h"

#include <fmt/format.h>

#include <cmath>

namespace tandem::trace {

TimeUnit pick_unit(double range_us) {
  if (range_us >= 1e6) return {"s", 1e6};
  if (range_us >= 1e3) return {"ms", 1e3};
  return {"µs", 1};
}

std::vector<double> nice_ticks(double begin, double end, int target) {
  if (!(end > begin) || target < 1) return {begin};
  auto count = [&](double step) {
    return std::floor(end / step + 1e-9) - std::ceil(begin / step - 1e-9) + 1;
  };
  const double magnitude = std::pow(10.0, std::floor(std::log10((end - begin) / target)));
  double best = 0;
  for (double scale : {0.1, 1.0, 10.0}) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * magnitude * scale;
      // Closest count to target wins; on a tie the larger step (fewer labels) wins.
      if (best == 0 || std::abs(count(step) - target) <= std::abs(count(best) - target))
        best = step;
    }
  }
  std::vector<double> ticks;
  const double first = std::ceil(begin / best - 1e-9);
  const double last = std::floor(end / best + 1e-9);
  for (double k = first; k <= last; k += 1) ticks.push_back(k * best);
  return ticks;
}

std::string format_tick(double value_us, const TimeUnit& unit) {
  double value = value_us / unit.us;
  if (std::abs(value) < 1e-12) value = 0;  // no "-0"
  return fmt::format("{:g}", value);
}

}  // namespace tandem::trace
