// The planner's costs, measured once (planner.h: measure_plan_costs).
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "memory_partition.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/train/planner.h"

namespace tandem::train {

const LayoutCosts& PlanCosts::of(int spatial, int64_t micro, Precision precision) const {
  for (const LayoutCosts& l : layouts)
    if (l.spatial == spatial && l.micro == micro && l.precision == precision) return l;
  TANDEM_CHECK(false, "no costs were measured for slabs of {} and micro-batches of {} in {}",
               spatial, micro, name_of(precision));
}

double measured_core_efficiency(int cores) {
  if (cores < 2) return 1;
  // One thread's products, with one thread for ATen and BLAS (as a device of one thread has).
  auto products = [] {
    at::set_num_threads(1);
    const torch::Tensor a = torch::randn({384, 384}), b = torch::randn({384, 384});
    torch::Tensor c = torch::mm(a, b);  // warm
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 40; ++k) c = torch::mm(a, c.clamp(-1, 1));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int threads_before = at::get_num_threads();
  set_blas_threads(1);
  std::vector<double> rounds;
  for (int r = 0; r < 3; ++r) {
    const double alone = products();
    std::vector<double> together(static_cast<size_t>(cores), 0.0);
    std::vector<std::thread> running;
    for (int k = 0; k < cores; ++k)
      running.emplace_back([&, k] { together[static_cast<size_t>(k)] = products(); });
    for (std::thread& t : running) t.join();
    rounds.push_back(alone / *std::max_element(together.begin(), together.end()));
  }
  at::set_num_threads(threads_before);
  std::sort(rounds.begin(), rounds.end());
  return std::min(1.0, rounds[1]);
}

PlanCosts measure_plan_costs(const Config& c, const graph::Model& model, const Source& source,
                             const PlanSpace& space, int repeats, Job* job) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<DeviceSpec> devices = parse_devices(c.devices, c.threads_per_device);
  PlanCosts costs;
  costs.core_efficiency = measured_core_efficiency(available_cores());
  const std::vector<Precision> precisions =
      space.precisions.empty() ? std::vector<Precision>{c.precision} : space.precisions;
  for (Precision p : precisions) {
    for (int s : space.spatial) {
      for (int m : space.microbatches) {
        const int64_t micro = c.batch / m + (c.batch % m ? 1 : 0);  // the largest micro-batch
        bool measured = false;
        for (const LayoutCosts& l : costs.layouts)
          measured |= l.spatial == s && l.micro == micro && l.precision == p;
        if (measured) continue;
        Config layout = c;
        layout.spatial = s;
        layout.microbatches = m;
        layout.precision = p;
        const PlanInputs in{model, layout, source, {devices.front()}, false, job};
        LayoutCosts l;
        l.spatial = s;
        l.micro = micro;
        l.precision = p;
        l.bytes = measure_bytes(in);
        l.times = measure_times(in, repeats);
        costs.layouts.push_back(std::move(l));
      }
    }
  }
  costs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return costs;
}

}  // namespace tandem::train
