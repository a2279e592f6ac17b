// Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", 2023/2024): backward is
// split into I (d(loss)/d(inputs), needed upstream at once) and W (d(loss)/d(weights), needed
// only by the optimizer step), and W is moved into what would be bubbles.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"

namespace tandem::schedule {
namespace {

Action f(int stage, int mb) { return compute_action(stage, Op::kForward, mb); }
Action i(int stage, int mb) { return compute_action(stage, Op::kInput, mb); }
Action w(int stage, int mb) { return compute_action(stage, Op::kWeight, mb); }

}  // namespace

// Stage s, warm-up n = min(p-s-1, m):
//   F(0) .. F(n-1), then for k = 0..m-1: [F(n+k) while < m] I(k) [W(k-s) once k >= s],
//   then the remaining W.
// Holding W(k) back by s slots keeps at most n + 1 + s = p micro-batches waiting for their W.
Schedule zb_h1(int stages, int microbatches) {
  TANDEM_CHECK(stages >= 1, "zb-h1 needs at least 1 stage; got stages={}.", stages);
  TANDEM_CHECK(microbatches >= 1, "zb-h1 needs at least 1 micro-batch; got microbatches={}.",
               microbatches);
  const int p = stages, m = microbatches;
  Schedule s;
  s.name = "zb-h1";
  s.num_stages = p;
  s.num_microbatches = m;
  s.num_devices = p;
  for (int stage = 0; stage < p; ++stage) s.stage_device.push_back(stage);
  s.device_actions.resize(p);
  for (int stage = 0; stage < p; ++stage) {
    std::vector<Action>& list = s.device_actions[stage];
    const int warmup = std::min(p - stage - 1, m);
    for (int mb = 0; mb < warmup; ++mb) list.push_back(f(stage, mb));
    int weights = 0;
    for (int k = 0; k < m; ++k) {
      if (warmup + k < m) list.push_back(f(stage, warmup + k));
      list.push_back(i(stage, k));
      if (k >= stage) list.push_back(w(stage, weights++));
    }
    while (weights < m) list.push_back(w(stage, weights++));
  }
  return s;
}

// Device d runs chunk 0 = stage d (the V's way down) and chunk 1 = stage 2p-1-d (the way up).
// With n = max(m, 2p-1) micro-batches counted:
//   warm-up   2(p-d)-1 F0; then d times F1 F0; then p-d times F1 I1 W1
//   steady    while F1 lags F0 or F0 < n: [F0 while < n] I0 W0 F1 I1 W1
//   cool-down d times I0 I1; p-d times I0 W0; then the remaining W1, then the remaining W0
// and every action of a micro-batch >= m is dropped (the others never depend on them).
Schedule zb_v(int devices, int microbatches) {
  TANDEM_CHECK(devices >= 1, "zb-v needs at least 1 device; got devices={}.", devices);
  TANDEM_CHECK(microbatches >= 1, "zb-v needs at least 1 micro-batch; got microbatches={}.",
               microbatches);
  const int p = devices, m = microbatches, n = std::max(m, 2 * p - 1);
  Schedule s;
  s.name = "zb-v";
  s.num_stages = 2 * p;
  s.num_microbatches = m;
  s.num_devices = p;
  for (int stage = 0; stage < 2 * p; ++stage) {
    s.stage_device.push_back(stage < p ? stage : 2 * p - 1 - stage);
  }
  s.device_actions.resize(p);
  for (int d = 0; d < p; ++d) {
    const int down = d, up = 2 * p - 1 - d;
    int f0 = 0, f1 = 0, i0 = 0, i1 = 0;
    std::vector<Action> list;
    for (int k = 0; k < 2 * (p - d) - 1; ++k) list.push_back(f(down, f0++));
    for (int k = 0; k < d; ++k) {
      list.push_back(f(up, f1++));
      list.push_back(f(down, f0++));
    }
    for (int k = 0; k < p - d; ++k) {
      list.push_back(f(up, f1++));
      list.push_back(i(up, i1));
      list.push_back(w(up, i1++));
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) list.push_back(f(down, f0++));
      list.push_back(i(down, i0));
      list.push_back(w(down, i0++));
      list.push_back(f(up, f1++));
      list.push_back(i(up, i1));
      list.push_back(w(up, i1++));
    }
    int w0 = i0, w1 = i1;
    for (int k = 0; k < d; ++k) {
      list.push_back(i(down, i0++));
      list.push_back(i(up, i1++));
    }
    for (int k = 0; k < p - d; ++k) {
      list.push_back(i(down, i0++));
      list.push_back(w(down, w0++));
    }
    while (w1 < i1) list.push_back(w(up, w1++));
    while (w0 < i0) list.push_back(w(down, w0++));
    TANDEM_ASSERT(f0 == n && i0 == n && w0 == n && f1 == n && i1 == n && w1 == n,
                  "zb-v counts on device {}: F {} {}, I {} {}, W {} {} (expected {})", d, f0, f1,
                  i0, i1, w0, w1, n);
    for (const Action& a : list) {
      if (a.microbatch < m) s.device_actions[d].push_back(a);
    }
  }
  return s;
}

Schedule v_capped(const std::string& name, int devices, int microbatches, int cap) {
  TANDEM_CHECK(devices >= 1, "{} needs at least 1 device; got devices={}.", name, devices);
  TANDEM_CHECK(microbatches >= 1, "{} needs at least 1 micro-batch; got microbatches={}.", name,
               microbatches);
  TANDEM_CHECK(cap >= 2, "{} needs a cap of at least 2 micro-batches per device; got {}.", name,
               cap);
  const int p = devices, m = microbatches, stages = 2 * p;
  Schedule s;
  s.name = name;
  s.num_stages = stages;
  s.num_microbatches = m;
  s.num_devices = p;
  for (int stage = 0; stage < stages; ++stage)
    s.stage_device.push_back(stage < p ? stage : stages - 1 - stage);
  s.device_actions.resize(p);
  // next[op][stage]: the stage's next micro-batch for that op; done: when an action ended (its
  // step), so that an action may use only what ended at an earlier step.
  std::vector<std::vector<int>> next(3, std::vector<int>(static_cast<size_t>(stages), 0));
  std::unordered_map<Action, int, ActionHash> done;
  std::vector<int> held(static_cast<size_t>(p), 0);
  auto ended = [&](const Action& a, int step) {
    const auto it = done.find(a);
    return it != done.end() && it->second < step;
  };
  auto next_of = [&](Op op, int stage) -> int& {
    const size_t k = op == Op::kForward ? 0 : op == Op::kInput ? 1 : 2;
    return next[k][static_cast<size_t>(stage)];
  };
  // The micro-batch of `op` that `stage` can run at `step`, or -1.
  auto ready = [&](Op op, int stage, int step) {
    const int mb = next_of(op, stage);
    if (mb >= m) return -1;
    bool ok = true;
    if (op == Op::kForward) ok = stage == 0 || ended(f(stage - 1, mb), step);
    if (op == Op::kInput)
      ok = ended(f(stage, mb), step) && (stage == stages - 1 || ended(i(stage + 1, mb), step));
    if (op == Op::kWeight) ok = ended(i(stage, mb), step);
    return ok ? mb : -1;
  };
  // The oldest ready micro-batch of `op` on the device's two stages, the later stage first.
  auto oldest = [&](Op op, int down, int up, int step) -> std::optional<Action> {
    const int a = ready(op, up, step), b = ready(op, down, step);
    if (a < 0 && b < 0) return std::nullopt;
    if (b < 0 || (a >= 0 && a <= b)) return compute_action(up, op, a);
    return compute_action(down, op, b);
  };
  const int total = 3 * stages * m;
  int scheduled = 0;
  bool acted_before = true;
  for (int step = 0; scheduled < total; ++step) {
    bool any = false;
    for (int d = 0; d < p; ++d) {
      const int down = d, up = stages - 1 - d;
      std::optional<Action> act = oldest(Op::kInput, down, up, step);
      if (!act) {
        // The earlier stage leaves one place for the later one: a micro-batch the device has
        // taken in can always go on through the V.
        const int mb_up = ready(Op::kForward, up, step);
        const int mb_down = ready(Op::kForward, down, step);
        const int h = held[static_cast<size_t>(d)];
        if (mb_up >= 0 && h + 1 <= cap)
          act = f(up, mb_up);
        else if (mb_down >= 0 && h + 1 <= cap - 1)
          act = f(down, mb_down);
      }
      if (!act) act = oldest(Op::kWeight, down, up, step);
      if (!act) continue;
      any = true;
      ++next_of(act->op, act->stage);
      if (act->op == Op::kForward) ++held[static_cast<size_t>(d)];
      if (act->op == Op::kWeight) --held[static_cast<size_t>(d)];
      done[*act] = step;
      s.device_actions[static_cast<size_t>(d)].push_back(*act);
      ++scheduled;
    }
    // A step where no device acts after one where none did leaves everything as it was.
    TANDEM_ASSERT(any || acted_before,
                  "{} on {} devices, {} micro-batches, cap {}: stuck at step {}", name, p, m, cap,
                  step);
    acted_before = any;
  }
  return s;
}

Schedule v_half(int devices, int microbatches) {
  return v_capped("v-half", devices, microbatches, 2 * ((devices + 2) / 2));
}

Schedule v_min(int devices, int microbatches) {
  return v_capped("v-min", devices, microbatches, 2 * ((devices + 4) / 3));
}

}  // namespace tandem::schedule
