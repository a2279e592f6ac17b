// The cores that the CPU devices of one process lend each other.
//
// Each CPU device worker has its own share of the cores (DeviceSpec::threads). In a pipeline
// most devices wait part of the time (bubbles, receives); with fixed shares the cores of a
// waiting device idle while another device computes alone on its share. A CoreShare hands
// the cores of waiting devices to the ones computing through the process-wide BLAS pool: each
// time a device begins a compute action, the pool is sized to `pool / computing` threads (at
// least the smallest share). It does not grow when a device ends, only at the next begin:
// devices often wait a moment between actions, and a pool that grew meanwhile would put two
// products on one core.
//
// Only BLAS threads are lent; ATen's own (OpenMP) threads stay at each device's share. Lending
// is opt-in (PipelineOptions::lend_idle_cores, --idle-cores lend) because it does not keep
// bits: how many threads compute a product then depends on which devices happen to be
// computing, and with OpenBLAS's Haswell and Zen kernels (with SkylakeX and Cooperlake ones
// for some shapes) the last bits of a product depend on its thread count. No split of a
// product into single-threaded products by rows or columns keeps its bits on every kernel
// family either (measured by bench/bench_blas_split.cc), so no such split could lend cores.
// Results under lending agree with fixed shares to float rounding.
//
// Thread-safe: every device worker calls begin()/end() (through Busy) on its own thread.
#pragma once

#include <mutex>
#include <vector>

namespace tandem {

class CoreShare {
 public:
  // `own[i]`: the threads of device i when every device computes at once, 0 for a device
  // outside the share (not local, not a CPU); `pool`: the cores the devices share, at least
  // the largest own share.
  CoreShare(std::vector<int> own, int pool);
  CoreShare(const CoreShare&) = delete;
  CoreShare& operator=(const CoreShare&) = delete;

  // Device `device` begins computing: sizes the BLAS pool for the devices computing now and
  // returns that size.
  int begin(int device);
  // Device `device` ends computing.
  void end(int device);

  // Marks its device as computing for its lifetime.
  class Busy {
   public:
    Busy(CoreShare* share, int device) : share_(share), device_(device) {
      if (share_) share_->begin(device_);
    }
    ~Busy() {
      if (share_) share_->end(device_);
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    CoreShare* share_;
    int device_;
  };

  // BLAS threads while `computing` devices compute at once.
  int threads_for(int computing) const;
  int computing() const;
  int blas_threads_set() const;  // what the share last gave the BLAS pool

 private:
  void set_blas_locked();

  const std::vector<int> own_;
  const int pool_;
  int min_own_ = 0;  // smallest positive own share
  mutable std::mutex mu_;
  int computing_ = 0;
  int blas_ = 0;  // last value given to the BLAS pool
};

// OpenBLAS's pool threads spin (yielding) for about 2^28 cycles after each product before
// they sleep; with cores lent back and forth, that spinning takes cores from the devices that
// compute single-threaded meanwhile. Restarts the pool with a shorter spin (2^20 cycles, well
// under a millisecond: the documented OPENBLAS_THREAD_TIMEOUT=20) unless the environment sets
// OPENBLAS_THREAD_TIMEOUT. Measured in bench/RESULTS.md.
// Once per process; call while no BLAS product runs. Returns false when the loaded BLAS is
// not a pthreads OpenBLAS or the environment decides.
bool shorten_blas_spin();

// The process-wide BLAS (OpenBLAS) threads; 0 when the loaded BLAS offers no such query.
int blas_threads();

}  // namespace tandem
