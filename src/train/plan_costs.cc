// The planner's costs, measured once (planner.h: measure_plan_costs).
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "memory_partition.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/train/job.h"
#include "tandem/train/planner.h"
#include "tandem/train/run_plan.h"
#include "tandem/transport/inprocess.h"

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

double TransportCosts::latency_of(int k) const {
  const auto it = latency.find(k);
  return it == latency.end() ? 0.0 : it->second;
}

namespace {

// Seconds for `bytes` between the measured (bytes, seconds) points of `curve`, ascending (0 with
// fewer than two). Beyond the last, along the last two, but never at a higher rate than the
// last's: where the last two took one time (the gradient sums take a smaller size's time down
// to a larger's), the line alone would give a sum of any size the last one's time.
double interpolated(const std::vector<std::pair<double, double>>& curve, double bytes) {
  if (curve.size() < 2 || bytes <= 0) return 0;
  size_t k = 1;
  while (k + 1 < curve.size() && curve[k].first < bytes) ++k;
  const auto [b0, t0] = curve[k - 1];
  const auto [b1, t1] = curve[k];
  const double line = std::max(0.0, t0 + (t1 - t0) * (bytes - b0) / (b1 - b0));
  return bytes > b1 && b1 > 0 ? std::max(line, t1 * bytes / b1) : line;
}

}  // namespace

double TransportCosts::copy_seconds(double bytes) const { return interpolated(copy, bytes); }

double TransportCosts::all_reduce_seconds(int spatial, double bytes) const {
  const auto it = all_reduce.find(spatial);
  return it == all_reduce.end() ? 0.0 : interpolated(it->second, bytes);
}

namespace {

// Seconds an exchange among k threads through an in-process transport adds to their work while
// `devices` threads work at once, as a run's devices do: each slab group's threads exchange
// halos between their layers' work, every group at once, and with more threads than cores an
// exchange also waits until the system runs the partner (job_transport.cc: loaded_exchange, the
// same between ranks). The threads in groups of k (those beyond the last whole group only work)
// run 2 x `rounds` rounds of one fixed work in blocks of 10, each round of every other block
// followed by an exchange with the thread's neighbours in its group (16 bytes each way): the
// rounds with an exchange less those without, per round, the mean over the exchanging threads,
// and at least the mean round of the exchanges alone (no work). Untimed: the first block of each
// kind, and each block's first round, where the threads meet again after a block without
// exchanges drew them apart. The blocks alternate so that both kinds meet the same moments of
// this machine's other work: timed one kind after the other, four plans of one configuration
// measured an exchange among 4 at 178 to 254 us and planned its step at 578 to 705 ms; in
// blocks, five plans measured 460 to 561 us and 678 to 720 ms (bench/RESULTS.md).
double loaded_exchange(int k, int devices, int rounds) {
  constexpr int kBlock = 10;
  TANDEM_CHECK(rounds >= kBlock && rounds % kBlock == 0,
               "an exchange is timed in blocks of {} rounds, not in {} rounds", kBlock, rounds);
  const std::vector<DeviceSpec> specs = parse_devices(std::to_string(devices), 1);
  std::vector<std::unique_ptr<DeviceContext>> contexts;
  std::vector<const DeviceContext*> pointers;
  for (const DeviceSpec& spec : specs) {
    contexts.push_back(std::make_unique<DeviceContext>(spec));
    pointers.push_back(contexts.back().get());
  }
  transport::InProcessTransport t(pointers, std::chrono::seconds(60));
  const int exchanging = devices / k * k;
  std::vector<double> with(static_cast<size_t>(devices), 0.0), without = with, alone = with;
  std::exception_ptr failed;
  std::mutex failed_mu;
  // `work`: the alternating blocks, into `with` and `without`; else the exchanges alone, every
  // round, into `alone`.
  auto run = [&](bool work) {
    std::vector<std::thread> threads;
    for (int j = 0; j < devices; ++j) {
      threads.emplace_back([&, j] {
        try {
          contexts[static_cast<size_t>(j)]->enter_worker_thread();
          at::set_num_threads(1);
          const int first = j / k * k;  // of the thread's group
          auto in_group = [&](int i) { return j < exchanging && i >= first && i < first + k; };
          const torch::Tensor a = torch::randn({128, 128}), planes = torch::zeros({4});
          torch::Tensor c = torch::randn({128, 128});
          const size_t me = static_cast<size_t>(j);
          const int all = work ? 2 * rounds + 2 * kBlock : rounds + 1;
          for (int r = 0; r < all; ++r) {
            const bool exchange = !work || (r / kBlock) % 2 == 0;
            const auto start = std::chrono::steady_clock::now();
            for (int n = 0; work && n < 4; ++n) c = torch::mm(a, c.clamp(-1, 1));
            if (exchange) {
              const transport::MessageKey key{"exchange", work ? 0 : 1, r, false, 0, 0, 0};
              for (int to : {j - 1, j + 1})
                if (in_group(to)) t.send(j, to, key, planes, nullptr);
              for (int from : {j - 1, j + 1})
                if (in_group(from)) t.recv(j, from, key, c10::kCPU);
            }
            // Untimed: the first block of each kind, and each block's first round, where the
            // threads meet again after the rounds without exchanges drew them apart.
            if (work ? r < 2 * kBlock || r % kBlock == 0 : r == 0) continue;
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            (!work ? alone : exchange ? with : without)[me] += seconds;
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(failed_mu);
          if (!failed) failed = std::current_exception();
          t.abort("an exchange of the transport's measurement failed");
        }
      });
    }
    for (std::thread& th : threads) th.join();
    if (failed) std::rethrow_exception(failed);
  };
  const int threads_before = at::get_num_threads();
  run(true);
  run(false);
  at::set_num_threads(threads_before);
  const double timed = static_cast<double>(rounds / kBlock * (kBlock - 1));  // of each kind
  double sum = 0, own = 0;
  for (int j = 0; j < exchanging; ++j) {
    sum += (with[static_cast<size_t>(j)] - without[static_cast<size_t>(j)]) / timed;
    own += alone[static_cast<size_t>(j)] / rounds;
  }
  // Never less than the exchanges alone: the difference of two times of work is noisier than
  // what a small exchange adds.
  return exchanging > 0 ? std::max(own, sum) / exchanging : 0.0;
}

// Seconds to copy `floats` floats on one thread into memory written before: the median of 9
// copies after a warm-up. A running pipeline's allocator hands a receiver pages it has mapped
// before (traces show an 8 MiB message taken in a fraction of a millisecond), where a copy
// into fresh pages would wait for the system to map each one as it is first written.
double copy_time(int64_t floats) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor from = torch::ones({floats});
  torch::Tensor into = torch::zeros({floats});
  std::vector<double> v;
  for (int k = 0; k < 10; ++k) {
    const auto start = std::chrono::steady_clock::now();
    into.copy_(from);
    if (k > 0)
      v.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  at::set_num_threads(threads_before);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double median_of_3(const std::function<double()>& f) {
  std::vector<double> v{f(), f(), f()};
  std::sort(v.begin(), v.end());
  return v[1];
}

}  // namespace

TransportCosts measured_transport(const std::set<int>& k, int devices) {
  TransportCosts costs;
  std::set<int> sizes = k;
  sizes.insert(2);
  for (int members : sizes)
    if (members >= 2)
      costs.latency[members] =
          median_of_3([&] { return loaded_exchange(members, std::max(devices, members), 50); });
  // The copies: up to 8 MiB (a 64³ volume's activation of 8 channels for one sample).
  costs.copy.emplace_back(0.0, 0.0);
  for (int64_t floats :
       {int64_t{1} << 14, int64_t{1} << 16, int64_t{1} << 18, int64_t{1} << 20, int64_t{1} << 21})
    costs.copy.emplace_back(floats * 4.0, std::max(costs.copy.back().second, copy_time(floats)));
  return costs;
}

PlanCosts measure_plan_costs(const Config& c, const graph::Model& model, const Source& source,
                             const PlanSpace& space, int repeats, Job* job) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<DeviceSpec> devices = parse_devices(c.devices, c.threads_per_device);
  PlanCosts costs;
  // Under MPI on rank 0 alone: every rank's probe at once would find the cores busy with the
  // others'.
  costs.core_efficiency = std::stod(once_for_the_job(
      job, [] { return fmt::format("{:.17g}", measured_core_efficiency(available_cores())); }));
  const std::vector<Precision> precisions =
      space.precisions.empty() ? std::vector<Precision>{c.precision} : space.precisions;
  std::vector<Config> configs;  // each layout's
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
        LayoutCosts l;
        l.spatial = s;
        l.micro = micro;
        l.precision = p;
        l.bytes = measure_bytes({model, layout, source, {devices.front()}, false, job});
        costs.layouts.push_back(std::move(l));
        configs.push_back(layout);
      }
    }
  }
  // The times in passes through every layout, one repetition of each per pass: a layout's
  // repetitions spread over the whole measurement, so that a moment when this machine's other
  // work takes the cores weighs on every layout a little rather than on one layout whole (one
  // plan took a layout's three repetitions in such a moment, and planned its steps at twice the
  // time another plan gave them). The first pass warms each layout up.
  std::vector<std::vector<runtime::LayerTimes>> passes(configs.size());
  for (int r = 0; r < repeats; ++r)
    for (size_t k = 0; k < configs.size(); ++k)
      passes[k].push_back(measure_times({model, configs[k], source, {devices.front()}, false, job},
                                        1, /*whole=*/true, /*warm_up=*/r == 0));
  // The optimizer's step depends on no layout: measured once.
  const OptimizerTimes steps =
      measure_optimizer_steps({model, c, source, {devices.front()}, false, job}, repeats);
  for (size_t k = 0; k < configs.size(); ++k) {
    costs.layouts[k].times = runtime::combined(passes[k]);
    costs.layouts[k].times.step = steps.step;
    costs.layouts[k].times.zero = steps.zero;
  }
  // The transport last, so that its threads and copies leave nothing behind that the layers'
  // times would take.
  std::set<int> groups(space.spatial.begin(), space.spatial.end());
  costs.in_process = !(job && job->mpi());
  if (!costs.in_process)
    costs.transport = measured_job_transport(*job, c, groups);
  else if (space.devices > 1)
    costs.transport = measured_transport(groups, space.devices);
  costs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return costs;
}

}  // namespace tandem::train
