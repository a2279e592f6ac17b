// Schedule generators: pure functions from (stages, micro-batches, options) to one action list
// per device. p = stages (= devices unless stated), m = micro-batches, stage s on device s unless
// stated. Every generator throws tandem::Error, with the values, for counts it cannot serve.
// Grids of each generator for small p and m are pinned in tests/schedule/grid_test.cc and
// tests/schedule/generators_test.cc.
#pragma once

#include <string>
#include <vector>

#include "tandem/schedule/schedule.h"

namespace tandem::schedule {

// One micro-batch at a time: F on every stage, then B on every stage, then the next micro-batch.
// Only one device is ever busy; the reference the pipelined schedules are compared against.
Schedule sequential(int stages, int microbatches);

// GPipe: all F, then all B, micro-batches ascending in both. Stage s holds m micro-batches.
// Backward in ascending order adds the micro-batches' weight gradients in the order every other
// schedule adds them, so all train bitwise the same weights (descending order rounded otherwise).
//   d0 | 0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3
Schedule gpipe(int stages, int microbatches);

// 1F1B (PipeDream-flush): stage s runs w = min(p-s-1, m) warm-up F, then pairs F(w+k) B(k), then
// the remaining B. Stage s holds at most min(p-s, m) micro-batches (see peak_in_flight()).
//   d0 | 0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3      (p = 4, m = 4)
//   d3 | 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3
Schedule one_f_one_b(int stages, int microbatches);

// Evaluation: F only, micro-batches ascending.
Schedule forward_only(int stages, int microbatches);

// Megatron-LM's interleaved 1F1B: stages = devices * V; device d holds stages d, d+p, d+2p, ...
// (its "chunks" 0..V-1). Forward visits micro-batches in rounds of p: micro-batches 0..p-1 on
// chunk 0, then on chunk 1, ..., chunk V-1, then p..2p-1 on chunk 0, ...; backward visits them in
// the same rounds with chunks reversed. Device d warms up with min(2(p-d-1) + (V-1)p, V*m) F,
// then alternates F and B, then drains B. Needs m to be a multiple of p when V > 1.
// V = 1 gives exactly one_f_one_b's lists.
Schedule interleaved(int devices, int virtual_stages, int microbatches);

// Zero-bubble H1 (Qi et al., 2023): backward split into I (input gradient, on the critical path)
// and W (weight gradient, free to move). Stage s keeps 1F1B's order of F and I; its W(k) follows
// I(k+s) instead of I(k), so later stages pass gradients upstream sooner and their W fill the
// cool-down. Stage s holds at most min(p, m) micro-batches until their W, the peak of 1F1B.
// With F = I = W and m >= p the bubble is a third of 1F1B's: makespan 3m + p - 1.
Schedule zb_h1(int stages, int microbatches);

// Zero-bubble V (Qi et al., 2024): 2p stages in a V; device d holds stages d and 2p-1-d, so the
// first and the last stage share device 0. Backward split into I and W. Built as PyTorch's
// ScheduleZBVZeroBubble does: counts for max(m, 2p-1) micro-batches, then drops the extra ones.
// A device holds at most 2 min(p, m) half-size micro-batches until their W: 1F1B's peak. With
// F = I = W per chunk and m >= 2p-1, each device idles p-1 of them (1F1B: 6(p-1)).
Schedule zb_v(int devices, int microbatches);

// V-shaped schedules of bounded memory (Qi et al., "Pipeline Parallelism with Controllable
// Memory", 2024): zb-v's placement (device d holds stages d and 2p-1-d) and split backward, with
// each device holding at most `cap` half-size micro-batches between their F and their W (zb-v
// holds up to 2p). Built by simulating unit costs (F = I = W): each device, at each step, runs
// the oldest ready I (the later stage first); else an F its cap allows (the later stage first; the
// earlier stage leaves one place free for the later one, so a micro-batch always passes the V's
// bottom); else the oldest ready W. Each stage runs its F, I and W in micro-batch order.
// cap >= 2. v_half: cap 2 ((p + 2) / 2), about half of 1F1B's 2p (the memory of the paper's
// V-Half); v_min: cap 2 ((p + 4) / 3), about a third (V-Min's). Not the paper's hand-built blocks:
// with F = I = W on 4 devices and 8 micro-batches (caps 6 and 4, against 8 for 1F1B and zb-v) they
// idle 0.158 and 0.314 of the step (1F1B 0.273, zb-v 0.059), within the paper's rates (p / 2m,
// 2p / 3m) with 2p micro-batches and above them with more.
Schedule v_capped(const std::string& name, int devices, int microbatches, int cap);
Schedule v_half(int devices, int microbatches);
Schedule v_min(int devices, int microbatches);

struct Options {
  // One-stage-per-device schedules: the number of stages (= devices). interleaved and zb-v: the
  // number of devices (the pipeline size); they build stages * virtual_stages and 2 * stages
  // stages.
  int stages = 1;
  int microbatches = 1;
  int virtual_stages = 1;  // interleaved: stages per device; zb-v: 1 or 2 (always 2); others: 1
};

}  // namespace tandem::schedule
