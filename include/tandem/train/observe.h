// Turning what ran into things to look at: trace spans of measured steps and of simulated
// schedules (one format for both), and a per-step report that compares the measured bubble
// with the simulator's prediction fed with the measured per-action times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/runtime/pipeline.h"
#include "tandem/schedule/simulate.h"
#include "tandem/trace/event.h"

namespace tandem::train {

// Appends the spans of one measured step: compute on the "compute" track, sends and receives
// on "comm" with flow ids linking each send to its receive. `offset_us` is the step's start on
// the trace's clock; `rank` (under MPI) names the device row ("r1 cpu:1"). With `replicas`, the
// pipeline's replica is part of each flow id, so that the replicas' messages in a merged trace
// keep ids of their own.
void add_step_spans(trace::Trace& out, const runtime::Pipeline& pipeline,
                    const std::vector<runtime::ActionTiming>& timings, int64_t step,
                    double offset_us, int rank = -1, int replicas = 1);

// Appends the halo exchanges and whole-sample sums of a spatial split, by device of the
// pipeline, on each device's "slabs" track (kind 'X', named "halo 3", "halo grad 3", "sum 3"
// with the micro-batch).
void add_exchange_spans(trace::Trace& out, const runtime::Pipeline& pipeline,
                        const std::vector<std::vector<spatial::Exchange>>& exchanges,
                        double offset_us, int rank = -1);

// Appends the phases of a training step after its actions (runtime::Pipeline::last_phases):
// the gradients' sums on each device's "comm" track (kind 'G', "gradient sums") and the optimizer's
// step on its "optimizer" track (kind 'O', "optimizer").
void add_phase_spans(trace::Trace& out, const runtime::Pipeline& pipeline,
                     const std::vector<runtime::PhaseTiming>& phases, double offset_us,
                     int rank = -1);

// The spans of a simulated timeline, `unit_us` microseconds per cost unit.
trace::Trace simulated_trace(const schedule::Schedule& schedule, const schedule::Timeline& timeline,
                             double unit_us = 1000);

struct StepReport {
  double seconds = 0;           // wall time from the first action's start to the last's end
  std::vector<double> busy;     // per device: fraction of the step spent computing
  std::vector<double> comm;     // per device: fraction spent in sends and receives (waits included)
  double measured_bubble = 0;   // 1 - sum(compute) / (devices x seconds)
  double predicted_bubble = 0;  // the simulator's, fed with the measured mean per-action times
  double flops = 0;             // multiply-adds x 2 of the layers with known FLOPs, per step
  // Spatial split, per device: the fraction of the step inside halo exchanges and
  // whole-sample sums (waits included), and the bytes it sent in them.
  std::vector<double> exchange;
  std::vector<int64_t> exchange_bytes;
};

// Measured against predicted for one step's timings (all devices of the pipeline).
StepReport analyze_step(const runtime::Pipeline& pipeline,
                        const std::vector<runtime::ActionTiming>& timings, int64_t batch,
                        const std::vector<std::vector<spatial::Exchange>>& exchanges = {});

// The peak of each memory that tandem counts, in device order: a GPU that several devices share
// (cuda:0,cuda:0) once, with the devices that share it; each CPU device on its own.
struct MemoryPeak {
  std::string name;  // the device's name: "cuda:0", "cpu:1"
  uint64_t peak_bytes = 0;
  std::vector<int> devices;  // indices into the pipeline's devices
  int rank = -1;             // under MPI, the process whose allocator this is
  // "cuda:0", or "cuda:0@r2" when another process counts a memory of the same name.
  std::string label;
};
std::vector<MemoryPeak> memory_peaks(const std::vector<DeviceSpec>& devices,
                                     const std::vector<uint64_t>& peak_bytes);

// The same under MPI, where every rank is a process with its own allocator: one memory per
// rank, never merged, also when ranks share a GPU. `rank_peaks[q]` is rank q's per-device peaks
// (the pipeline's devices; rank q runs device q % devices.size()).
std::vector<MemoryPeak> memory_peaks_of_ranks(const std::vector<DeviceSpec>& devices,
                                              const std::vector<std::vector<uint64_t>>& rank_peaks);

}  // namespace tandem::train
