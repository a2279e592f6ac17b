// Where a training run stands: enough, with the parameters and optimizer state, to continue it
// exactly as if it had not stopped.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/data/normalization.h"

namespace tandem::checkpoint {

struct TrainState {
  // Steps done; equals Pipeline::step() when saving (dropout streams are keyed by it).
  int64_t step = 0;
  // Epoch of the next step, and the samples of that epoch already consumed (global batch,
  // all replicas). The next step reads samples [position, position + global batch) of `epoch`.
  int64_t epoch = 0;
  int64_t position = 0;
  // The run's seed (initialization, data order, dropout).
  uint64_t seed = 0;
  // The data set it trains on (its registry name, e.g. "mnist"); "" where not known (a
  // checkpoint from before it was recorded, or a program that does not say).
  std::string data{};
  // How its inputs were standardized, with the moments of kDataset; kDefault where not known
  // (a checkpoint from before it was recorded, or a source that does not say).
  data::Normalization normalization{};
  // Loss scaling (train/loss_scale.h): the next step's scale, the clean steps in a row before
  // it, and the steps skipped so far; scale 0 where the run scaled no loss.
  double loss_scale = 0;
  int64_t loss_scale_clean_steps = 0;
  int64_t skipped_steps = 0;
};

}  // namespace tandem::checkpoint
