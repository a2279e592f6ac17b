// Dynamic loss scaling, as PyTorch's torch.cuda.amp.GradScaler does it: fp16's range ends at
// 65504 and its smallest normal number is 6.1e-5, so the gradients of a loss computed in fp16
// underflow unless the backward starts from a large scale S instead of 1. The gradients are then
// S times too large: they are divided by S before the optimizer, and a step where one of them is
// infinite or NaN (S was too large) is skipped, on every device and rank of the job alike, and S
// halves. After `interval` clean steps in a row S doubles. With S a power of two, scaling and
// dividing change no bit of a gradient that neither overflows nor falls below the normal range.
#pragma once

#include <cstdint>

namespace tandem::train {

class LossScaler {
 public:
  // PyTorch's defaults: 2^16, doubled after 2000 clean steps, halved at an overflow.
  explicit LossScaler(double init = 65536.0, int64_t interval = 2000);

  // The scale of the next step's backward.
  double scale() const { return scale_; }
  // Clean steps in a row since the scale last changed.
  int64_t clean_steps() const { return clean_steps_; }
  // Steps skipped so far in the run (a resumed run's include its checkpoint's).
  int64_t skipped_steps() const { return skipped_; }

  // After a step's backward: `finite` says whether every gradient of the job was finite. False:
  // the step is skipped and the scale halves; true: after `interval` of them the scale doubles.
  void update(bool finite);
  // Continues from a checkpoint's state.
  void restore(double scale, int64_t clean_steps, int64_t skipped_steps);

 private:
  double scale_;
  int64_t interval_;
  int64_t clean_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace tandem::train
