// Where training batches come from. A source yields the samples of a global batch by
// position, so every process and replica can read just its own shard.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>

namespace tandem::train {

struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

class Source {
 public:
  virtual ~Source() = default;
  // Samples per training epoch and in the held-out set.
  virtual int64_t train_size() const = 0;
  virtual int64_t test_size() const = 0;
  // Training samples [begin, end) of `epoch`'s order (shuffled by seed and epoch).
  virtual Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const = 0;
  // Held-out samples [begin, end).
  virtual Batch test_batch(int64_t begin, int64_t end) const = 0;
  virtual std::string describe() const = 0;
};

// `name`: mnist | fashion-mnist. `dir` empty: the default folder of that data set.
std::unique_ptr<Source> make_image_source(const std::string& name, const std::string& dir,
                                          uint64_t seed);

}  // namespace tandem::train
