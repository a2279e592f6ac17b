#include "tandem/train/loss_scale.h"

#include <cmath>

#include "tandem/common/check.h"

namespace tandem::train {

LossScaler::LossScaler(double init, int64_t interval) : scale_(init), interval_(interval) {
  TANDEM_CHECK(std::isfinite(init) && init > 0, "a loss scale must be a positive number, not {}",
               init);
  TANDEM_CHECK(interval >= 1, "the loss scale's growth interval must be at least 1 step, not {}",
               interval);
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= 0.5;
    clean_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++clean_steps_ < interval_) return;
  // GradScaler keeps a scale that would overflow fp32 where it is.
  if (std::isfinite(static_cast<float>(scale_ * 2.0))) scale_ *= 2.0;
  clean_steps_ = 0;
}

void LossScaler::restore(double scale, int64_t clean_steps, int64_t skipped_steps) {
  TANDEM_CHECK(std::isfinite(scale) && scale > 0 && clean_steps >= 0 && skipped_steps >= 0,
               "a checkpoint's loss scale {} (after {} clean steps, {} skipped) is not one a run "
               "reaches: the file is damaged",
               scale, clean_steps, skipped_steps);
  scale_ = scale;
  clean_steps_ = clean_steps;
  skipped_ = skipped_steps;
}

}  // namespace tandem::train
