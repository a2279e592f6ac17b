// Where the calling thread is in a training step: which device, stage, layer, micro-batch and
// phase. The runtime's worker threads set it; the allocator hook reads `device` to charge
// bytes, and out-of-memory messages quote the rest.
//
// Thread-safety: each thread has its own record (thread_local); nothing here is shared.
// Cost: a ScopedWhere moves a few ints and strings in and out of the thread's record. No
// lock, no system call; a name longer than the small-string buffer (15 chars in libstdc++)
// costs one heap copy. Cheap enough to set around every layer call.
//
// Note: work LibTorch runs on its own threads (intra-op pools, the autograd engine's device
// threads for CUDA) does not see this record. CPU autograd runs on the thread that calls
// backward(), so it does.
#pragma once

#include <string>

namespace tandem::memory {

struct Where {
  int device = -1;          // tandem device index; -1 = no device (the "host" bucket)
  std::string device_name;  // e.g. "cpu:1"
  int stage = -1;
  std::string layer;
  int microbatch = -1;
  std::string phase;  // "forward", "backward", "optimizer", "parameters", "recompute", "transfer"
};

// The calling thread's record; valid until the thread ends, changed by ScopedWhere.
const Where& current_where();

// "stage 1, layer conv3 (forward, micro-batch 2)", leaving out the parts not set; "" when none.
std::string describe(const Where& where);

// Sets part of the calling thread's record for its lifetime and restores the previous values
// when it ends. Scopes must end in reverse order of construction on the thread that made
// them (as stack objects do); neither copyable nor movable for that reason.
class ScopedWhere {
 public:
  // A device's worker thread: sets device and device_name.
  ScopedWhere(int device, std::string device_name);
  // One action of a stage: sets stage, phase and micro-batch.
  ScopedWhere(int stage, std::string phase, int microbatch);
  // One layer call inside an action: sets layer.
  explicit ScopedWhere(std::string layer);
  ~ScopedWhere();

  ScopedWhere(const ScopedWhere&) = delete;
  ScopedWhere& operator=(const ScopedWhere&) = delete;

 private:
  enum class Kind { kDevice, kAction, kLayer };
  Kind kind_;
  int saved_a_ = -1;        // device or stage
  int saved_b_ = -1;        // micro-batch
  std::string saved_text_;  // device_name, phase or layer
};

}  // namespace tandem::memory
