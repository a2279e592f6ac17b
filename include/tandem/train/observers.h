// What a training run writes besides its result (`tandem train --trace --timeline --report
// --tensorboard`, and any program's trainer): a Chrome trace and an SVG timeline of a few
// steps, a JSON report comparing the measured bubble with the simulator's prediction, and
// TensorBoard scalars. Under MPI, rank 0 writes one merged trace on rank 0's clock.
//
//   train::Observers observers({"run.json", "run.svg", "report.json", "tb"}, *trainer, job);
//   train::Result r = trainer->run([&](int64_t step, int64_t, const runtime::StepStats& s,
//                                      double samples_per_s) {
//     observers.after_step(step, s, samples_per_s);
//   });
//   observers.finish(r, train::run_memory(job, trainer->pipeline(), r.peak_bytes));
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tandem/trace/event.h"
#include "tandem/trace/tensorboard.h"
#include "tandem/train/job.h"
#include "tandem/train/observe.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

struct ObserveOptions {
  // Files (trace: Chrome JSON, timeline: SVG, report: JSON) and a TensorBoard folder; empty:
  // not written.
  std::string trace, timeline, report, tensorboard;
  int trace_steps = 3;
  // What a planner predicted for this run (train --auto): the report sets it beside the
  // measured step time (the median of the steps after the first) and every device's peak.
  struct Prediction {
    std::string flags;  // the configuration chosen
    double step_seconds = 0;
    std::vector<double> peak_bytes;     // per device group, at most
    std::vector<double> planned_bytes;  // per device group, planned (PlannedRun::device_planned)
  };
  std::optional<Prediction> predicted;
};

// The peak of every memory the run used. Under MPI every rank's peaks, gathered (collective):
// one memory per rank, labelled cuda:0@r2 where ranks share a GPU.
std::vector<MemoryPeak> run_memory(Job& job, const runtime::Pipeline& pipeline,
                                   const std::vector<uint64_t>& peak_bytes);

// Refuses (Error) outputs this process would write at the end of the run but cannot: a trace,
// timeline or report whose folder is missing or read-only, a TensorBoard or checkpoint folder
// that cannot be created. Each process checks what it writes itself.
void check_outputs(const ObserveOptions& options, const Trainer& trainer, const Job& job);

class Observers {
 public:
  Observers(ObserveOptions options, Trainer& trainer, Job& job);
  // After every training step (step counts from 1).
  void after_step(int64_t step, const runtime::StepStats& stats, double samples_per_s);
  // After training and evaluation, with the run's memories (run_memory); collective under MPI.
  void finish(const Result& result, const std::vector<MemoryPeak>& memory);
  // The median of the steps' seconds after the first (which also makes the optimizer's state);
  // the first alone after one step, 0 before any.
  double measured_step_seconds() const;

 private:
  bool tracing(int64_t step) const;
  // Collective under MPI: every rank's spans, merged and written by rank 0.
  void write_trace();
  // Collective: every rank's timings of the traced steps, analyzed on the writing rank.
  void gather_reports();
  void write_report(const Result& result, const std::vector<MemoryPeak>& memory);

  ObserveOptions options_;
  Trainer& trainer_;
  Job& job_;
  std::unique_ptr<trace::EventWriter> tensorboard_;
  trace::Trace trace_;
  std::vector<StepReport> reports_;
  std::vector<double> step_seconds_;  // every step's
  std::vector<int64_t> skipped_;      // the steps (from 1) the loss scaling skipped
  // Under MPI: this rank's timings of each traced step, and when the step started (steady
  // clock, µs).
  struct TracedStep {
    double origin_us = 0;
    std::vector<runtime::ActionTiming> timings;
    std::vector<std::vector<spatial::Exchange>> exchanges;  // by device (spatial split)
  };
  std::vector<TracedStep> traced_;
};

}  // namespace tandem::train
