// A training progress display: a tqdm-like bar redrawn in place on a terminal, plain lines
// in a log file or pipe.
//
//   bar:   37%|###########                   | 370/1000 [00:12<00:20, 30.1 steps/s] loss=0.432
//   line:  step 370/1000 (37%) elapsed 00:12 eta 00:20 30.1 steps/s loss=0.432
//
// Output is rate-limited to one redraw per min_interval_s (0.1 s: ~10 per second) so a fast
// loop does not spend its time printing; the first update, the last step and finish() always
// print. Steps count completed steps from 0; the rate is steps / elapsed time since construction.
// Not thread-safe: one thread (the training loop) calls update and finish.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::trace {

class Progress {
 public:
  enum class Mode { kAuto, kBar, kLine, kNone };               // auto: bar on a terminal, else line
  using Values = std::vector<std::pair<std::string, double>>;  // printed in this order
  using Clock = std::function<double()>;                       // seconds, never decreasing

  // total_steps <= 0: unknown total (no percentage, no ETA). `out` is not owned; nullptr
  // means kNone. `clock` defaults to the steady clock; tests inject their own.
  Progress(Mode mode, int64_t total_steps, std::FILE* out = stderr, Clock clock = {},
           double min_interval_s = 0.1);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // What is counted, singular and plural ("step", "steps" unless set).
  void set_unit(std::string one, std::string many) {
    unit_ = std::move(one);
    units_ = std::move(many);
  }

  void update(int64_t step, const Values& values = {});
  // Prints the latest state if it was held back by the rate limit, and ends the bar's line.
  // Later calls do nothing.
  void finish();

  // The mode after resolving kAuto (kBar or kLine), or kNone.
  Mode mode() const { return mode_; }

  // The text of one display, without "\r" or newline (exposed for tests).
  std::string render(int64_t step, double elapsed_s, const Values& values) const;

 private:
  void print(double now);

  Mode mode_;
  int64_t total_;
  std::FILE* out_;
  Clock clock_;
  double min_interval_s_;
  double start_s_;
  double last_print_s_ = 0;
  bool printed_ = false;  // anything printed yet
  bool pending_ = false;  // the latest update was held back by the rate limit
  bool finished_ = false;
  int64_t step_ = 0;
  Values values_;
  int width_ = 0;  // terminal columns for the bar (0: unknown, no truncation)
  std::string unit_ = "step", units_ = "steps";
};

}  // namespace tandem::trace
