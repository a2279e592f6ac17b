// Megatron-LM's interleaved 1F1B (Narayanan et al., 2021), p devices with V chunks each.
//
// The k-th forward of device d (k in 0..V*m-1), in rounds of p*V:
//   round r = k / (p*V), j = k % (p*V), chunk c = j / p, micro-batch r*p + j % p,
//   stage c*p + d.
// The k-th backward is the same with chunk V-1-c. With F = B = 1 per chunk and m a multiple of
// p, the makespan is 2Vm + 2(p-1): each device idles (p-1)/(Vm) of its 2Vm compute time, the
// bubble of 1F1B (p-1)/m divided by V.
#include <algorithm>

#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"

namespace tandem::schedule {

Schedule interleaved(int devices, int virtual_stages, int microbatches) {
  TANDEM_CHECK(devices >= 1, "interleaved needs at least 1 device; got devices={}.", devices);
  TANDEM_CHECK(virtual_stages >= 1,
               "interleaved needs at least 1 virtual stage per device; got virtual_stages={}.",
               virtual_stages);
  TANDEM_CHECK(microbatches >= 1, "interleaved needs at least 1 micro-batch; got microbatches={}.",
               microbatches);
  if (virtual_stages == 1) {
    Schedule s = one_f_one_b(devices, microbatches);
    s.name = "interleaved";
    return s;
  }
  const int p = devices, v = virtual_stages, m = microbatches;
  if (m % p != 0) {
    const std::string lower = m > p ? fmt::format(" or {}", m / p * p) : "";
    TANDEM_CHECK(false,
                 "interleaved with {} virtual stages per device needs a micro-batch count that "
                 "is a multiple of the devices; got {} micro-batches on {} devices (use "
                 "Options::microbatches = {}{}).",
                 v, m, p, (m / p + 1) * p, lower);
  }
  Schedule s;
  s.name = "interleaved";
  s.num_stages = p * v;
  s.num_microbatches = m;
  s.num_devices = p;
  for (int stage = 0; stage < p * v; ++stage) s.stage_device.push_back(stage % p);
  s.device_actions.resize(p);

  const int total = v * m;  // actions of each kind per device
  for (int d = 0; d < p; ++d) {
    auto nth = [&](int k, Op op) {
      const int j = k % (p * v);
      const int chunk = op == Op::kForward ? j / p : v - 1 - j / p;
      return compute_action(chunk * p + d, op, (k / (p * v)) * p + j % p);
    };
    std::vector<Action>& list = s.device_actions[d];
    const int warmup = std::min(2 * (p - d - 1) + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k) list.push_back(nth(k, Op::kForward));
    for (int k = 0; warmup + k < total; ++k) {
      list.push_back(nth(warmup + k, Op::kForward));
      list.push_back(nth(k, Op::kBackward));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(nth(k, Op::kBackward));
  }
  return s;
}

}  // namespace tandem::schedule
