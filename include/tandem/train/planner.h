// The planner: which layout of the model on the run's devices trains fastest within the memory
// budget (tandem plan, tandem train --auto). Costs in, configurations out:
//
//  - the space: --spatial (the device counts that divide the devices and the depth allows),
//    every registered schedule that trains (interleaved with --virtual-stages 2 unless given),
//    the micro-batch counts that divide the batch (up to 16), --recompute none and stage; an
//    option the caller fixes keeps its value;
//  - the costs: for every slab count and micro-batch size of the space, one micro-batch
//    measured layer by layer on the calling thread with a device's threads, its bytes as the
//    memory plan measures them (runtime::measure_layer_bytes) and its forward, backward and
//    split backward times (runtime::measure_layer_times, the median over passes through the
//    model after a warm-up pass), with the halo exchanges and sums each layer makes on a slab
//    and their bytes; and the transport once: how long an exchange among the devices of a
//    group waits, and how fast a receiver copies (TransportCosts); under MPI, between the ranks
//    through the job's transport (the slowest link between neighbouring ranks), with the sums
//    of the weight gradients over the replicas and the slabs on other ranks;
//  - each configuration: its stages split (every contiguous split where there are few, else by
//    measured time under the budget), its peak per device as the memory plan's "at most" (the
//    messages a late receiver may leave included: no timing of the run goes above it), and its step
//    time from the schedule simulator on the stages' summed times (a recomputing stage runs its
//    forward again before each backward; a stage's forward takes the messages it receives, its
//    backward the gradients of those it sent, and a layer on slabs its exchanges; under MPI each
//    device then waits for its gradients' sums), but never less than the step's whole work over
//    the machine's cores: in-process CPU devices share the cores, so more devices than cores
//    wait for them (under MPI: the cores of the job's hosts over the replicas).
//
// Under MPI (Job::mpi()) one replica's ranks are the devices: rank 0 measures the layers, every
// rank plans from its numbers (the same choice everywhere), and the replicas stay as given (they
// set the global batch).
//
// The search is exhaustive over the space, and over the splits of a configuration's layers up to
// PlanSpace::every_split of them (planner.cc argues the pruning beyond). The time counts each
// device's optimizer step after its last action, and the zeroing of its gradients before its first
// (LayerTimes::zero: in process all devices' one after another); left out of it: the loss and its
// sums over the slabs (the layers' times do not hold the loss), and the sums of the weight
// gradients of slabs in one process (in memory).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/runtime/layer_times.h"
#include "tandem/runtime/memory_plan.h"
#include "tandem/train/config.h"
#include "tandem/train/source.h"

namespace tandem::train {

class Job;

// What the search tries. Each list holds the one value of a fixed option.
struct PlanSpace {
  int devices = 1;  // of one replica
  std::vector<int> spatial;
  std::vector<int> microbatches;
  std::vector<std::string> schedules;
  std::vector<bool> recompute;
  // fp32, and bf16 where this process's kernels compute it on every device (on CPU devices:
  // --cpu-kernels native on a processor with AVX-512 or AMX), unless --precision is given.
  std::vector<Precision> precisions;
  int virtual_stages = 2;  // for a schedule that takes them (interleaved)
  // Up to this many contiguous splits of the layers into a configuration's stages, every one
  // is planned; beyond, the split by time under the budget alone (planner.cc says why).
  size_t every_split = 256;
};

// The space for `c` (its devices, batch and model) with the Config fields named in `fixed`
// ("spatial", "microbatches", "schedule", "recompute", "virtual_stages", "balance", "stages",
// "precision")
// held at c's values. Throws tandem::Error for a configuration no search can start from (CUDA
// devices: the costs are measured on the CPU).
PlanSpace plan_space(const Config& c, const graph::Model& model, const Source& source,
                     const std::set<std::string>& fixed = {});

// The costs of one layout: slabs of `spatial`, micro-batches of `micro` samples, forwards in
// `precision`.
struct LayoutCosts {
  int spatial = 1;
  int64_t micro = 1;
  Precision precision = Precision::kFp32;
  runtime::LayerBytes bytes;
  runtime::LayerTimes times;
};

// What a message between devices of this process costs (transport/inprocess.h: the sender
// leaves a reference, the receiver wakes and copies it).
struct TransportCosts {
  // Seconds one exchange among k devices at once adds to their work, by k: each sends a small
  // message to its neighbours and takes theirs, as a slab group's halo exchange does (k = 2
  // also stands for a message between two stages). Measured while every device works, as in a
  // run: with more devices than cores an exchange also waits for the system to run the
  // partner.
  std::map<int, double> latency;
  // Seconds a receiver takes to copy a message, by its bytes, in ascending bytes: a message's
  // copy is interpolated between them (beyond the last, along the last two, and no faster than
  // the last's bytes per second). Not one rate:
  // small copies stay in the processor's caches.
  std::vector<std::pair<double, double>> copy;
  // Under MPI: seconds to sum a device's weight gradients of some bytes over its data-parallel
  // group (the replicas, and the slabs of a spatial split, which run on other ranks), by the
  // --spatial of the configuration, in ascending bytes as `copy`. Empty: no sum crosses ranks
  // (in process).
  std::map<int, std::vector<std::pair<double, double>>> all_reduce;
  // Where it was measured: "in process", or "between N ranks over MPI".
  std::string where = "in process";
  // latency of k devices (0 where not measured: costs set by hand).
  double latency_of(int k) const;
  // The copy of a message of `bytes` (0 without measured copies).
  double copy_seconds(double bytes) const;
  // The sum of `bytes` of gradients among the devices of a configuration with --spatial
  // `spatial` (0 where none was measured).
  double all_reduce_seconds(int spatial, double bytes) const;
  // What taking `messages` messages of `bytes` bytes in all costs: each a wait of an exchange
  // among `k` devices and the copy of its share of the bytes.
  double seconds(int k, int messages, double bytes) const {
    return messages > 0 ? messages * (latency_of(k) + copy_seconds(bytes / messages)) : 0.0;
  }
};

// Measures TransportCosts on this process's in-process transport for the group sizes `k` (2
// always): what an exchange of 16 bytes among k threads adds to their work while `devices`
// threads work at once (plan_costs.cc: loaded_exchange), the median of 3; and copies of 64 KiB
// to 8 MiB on one thread into memory written before, as a running pipeline's receivers copy.
TransportCosts measured_transport(const std::set<int>& k, int devices);

// Under MPI: TransportCosts between the ranks of `job`, measured on its transport by every rank
// (collective): what an exchange among k ranks adds to their work while every rank works, for
// the group sizes `k` (2 always; job_transport.cc: loaded_exchange); messages of
// 16 bytes to 8 MiB between every two ranks neighbouring in rank order (where a run places its
// stages and slabs), the slowest pair's time at each size (its small message's time as the
// latency of 2, the rest as the copy); and, for every --spatial of `k` whose gradients a run
// sums across ranks (config.replicas x spatial > 1), the job's transport made again for that
// layout (Job::relayout) and sums of 64 KiB to 16 MiB over its data-parallel groups at once,
// the slowest rank's. Rank 0's numbers on every rank. `config`: the job's layout, restored
// after.
TransportCosts measured_job_transport(Job& job, const Config& config, const std::set<int>& k);

// The cores one replica's devices share: in process, available_cores(); under MPI, the cores of
// every host of the job (each host counted once) over `replicas`, at least 1. Collective under
// MPI.
int job_cores(Job& job, int replicas);

// The JSON form of TransportCosts (how rank 0's measurement reaches every rank).
std::string transport_costs_json(const TransportCosts& t);
TransportCosts transport_costs_from_json(const std::string& text);

struct PlanCosts {
  std::vector<LayoutCosts> layouts;
  TransportCosts transport;  // zero: messages and halo exchanges take no time
  double seconds = 0;        // spent measuring
  // How fast the machine's cores compute all at once, each against one alone (1: they do not
  // slow each other; virtual cores that share a physical one, or a shared memory bus, less):
  // measured_core_efficiency().
  double core_efficiency = 1;
  // Whether the devices are this process's threads (false under MPI): one thread then zeroes
  // every device's gradients at a step's start, one device after another (runtime/pipeline.cc),
  // where each rank zeroes its own.
  bool in_process = true;
  // The layout's costs; throws tandem::Error when they were not measured.
  const LayoutCosts& of(int spatial, int64_t micro, Precision precision = Precision::kFp32) const;
};

// Runs the same products (single-threaded matrix products of 384 x 384) on one thread alone and
// then on `cores` threads at once, and returns the time alone over the slowest thread's at
// once: the median of 3 rounds, at most 1.
double measured_core_efficiency(int cores);

// Measures every layout of `space` (train/memory_partition.h: measure_bytes, and measure_times
// in `repeats` passes through every layout, one timed repetition of each per pass, combined by
// runtime::combined). One process of `job` measures (null: this one).
PlanCosts measure_plan_costs(const Config& c, const graph::Model& model, const Source& source,
                             const PlanSpace& space, int repeats = 3, Job* job = nullptr);

// One configuration, planned.
struct PlannedRun {
  Config config;      // c with this configuration's options (and --balance of its partition)
  std::string flags;  // those options as flags: "--spatial 2 --schedule 1f1b ..."
  std::vector<double> device_peak;  // each device group's memory at most (its peak bytes)
  // Each device group's planned peak: without what late receivers and activations in transit
  // may leave (a run whose stages keep up meets this one; the budget is checked at most).
  std::vector<double> device_planned;
  std::vector<double> device_state;  // of which parameters, gradients and optimizer state
  double peak = 0;                   // the largest of them
  double step_seconds = 0;           // predicted
  double samples_per_s = 0;          // predicted: the global batch over step_seconds
  bool fits = true;                  // within Config::device_memory (always without one)
  std::string why_not;               // not empty: why it cannot run (a schedule's refusal)
};

struct Planning {
  // Every configuration of the space: those that fit, fastest first (the first is the choice),
  // then those over the budget, leanest first, then those that cannot run.
  std::vector<PlannedRun> runs;
  double measure_seconds = 0;
  int layouts = 0;             // measured
  double core_efficiency = 1;  // PlanCosts::core_efficiency
  TransportCosts transport;    // PlanCosts::transport
  int ranks = 0;               // under MPI: the job's ranks (0 in process)
  // The choice, or null when nothing fits.
  const PlannedRun* chosen() const;
};

// Plans every configuration of `space` for `c` on the measured `costs`, with `cores` cores for
// the devices (common/device.h: available_cores()).
Planning plan_search(const Config& c, const graph::Model& model, const PlanSpace& space,
                     const PlanCosts& costs, int cores);

// The space, the costs and the search in one call.
Planning plan(const Config& c, const graph::Model& model, const Source& source,
              const std::set<std::string>& fixed = {}, int repeats = 3, Job* job = nullptr);

// The largest volume on the model's grid that trains under the budget (tandem plan --volume
// max). `make(v)` makes the model and its data for volumes of side v (Config::volume = v, as
// the trainer would); `grid`: the step between volumes the model takes (its slab multiple).
// Volumes are tried by doubling from c.volume (by halving it, when it does not fit, down to the
// grid's first volume) and then halving the interval between the largest that fits and the
// smallest that does not. Whether a volume fits needs bytes alone: at
// each, the layouts are measured leanest first (the most slabs, the smallest micro-batches)
// until one has a configuration that fits; a layout with none at a volume is not measured at
// larger ones (its bytes only grow with the voxels), and where the leanest layout fits nothing
// and its fullest device holds mostly activations, the others are not measured either (fewer
// slabs hold more of every activation: planner.cc). The volume found is then planned in
// full, times measured.
struct ModelAndData {
  graph::Model model;
  std::unique_ptr<Source> source;
};
struct LargestVolume {
  int64_t volume = 0;  // 0: not even the smallest volume of the grid fits
  Planning planning;   // at `volume`
  // Why the next volume of the grid does not fit: the leanest configuration there and what its
  // fullest device holds, or the error that refused it.
  std::string limit;
  std::vector<std::pair<int64_t, bool>> tried;  // every volume tried and whether it fit
};
LargestVolume largest_volume(const Config& c, int64_t grid,
                             const std::function<ModelAndData(int64_t)>& make,
                             const std::set<std::string>& fixed = {}, int repeats = 3,
                             Job* job = nullptr);

// The planning as text: the best `top` configurations that fit (rank, samples/s, step time,
// largest planned peak per device, flags), those that do not fit grouped by reason, and the
// chosen configuration's whole command line ("tandem train ...").
std::string planning_table(const Planning& p, const Config& c, int top = 10);
// The same as JSON, every configuration included.
std::string planning_json(const Planning& p, const Config& c);
// "tandem train" ("mpirun -n `ranks` tandem train" for ranks > 0) and every option of `c` that
// differs from Config{}'s, as flags, with the schedule, micro-batch count and recomputation the
// planner chose always written out (and --cpu-kernels native for --precision bf16, which the
// portable kernels refuse).
std::string command_line(const Config& c, int ranks = 0);

}  // namespace tandem::train
