#include "core_share.h"

#include <algorithm>
#include <cstdlib>

#include "common/loaded_symbol.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"

namespace tandem {

using detail::loaded_symbol;

int blas_threads() {
  static const auto fn = loaded_symbol<int (*)()>("openblas_get_num_threads");
  return fn ? fn() : 0;
}

bool shorten_blas_spin() {
  static std::once_flag once;
  static bool done = false;
  std::call_once(once, [] {
    if (std::getenv("OPENBLAS_THREAD_TIMEOUT")) return;
    const auto read_env = loaded_symbol<void (*)()>("openblas_read_env");
    const auto shutdown = loaded_symbol<int (*)()>("blas_thread_shutdown_");
    const auto get_threads = loaded_symbol<int (*)()>("openblas_get_num_threads");
    const auto parallel = loaded_symbol<int (*)()>("openblas_get_parallel");
    // openblas_get_parallel: 1 for the pthreads pool, 2 for OpenMP (no pool of its own).
    if (!read_env || !shutdown || !get_threads || !parallel || parallel() != 1) return;
    const int threads = get_threads();
    setenv("OPENBLAS_THREAD_TIMEOUT", "20", /*overwrite=*/0);
    read_env();  // the pool reads the timeout when it starts
    shutdown();  // joins the pool; the next call starts it again
    set_blas_threads(threads);
    done = true;
  });
  return done;
}

CoreShare::CoreShare(std::vector<int> own, int pool) : own_(std::move(own)), pool_(pool) {
  int max_own = 0;
  for (int t : own_) {
    TANDEM_CHECK(t >= 0, "a device cannot have {} threads", t);
    if (t > 0) min_own_ = min_own_ ? std::min(min_own_, t) : t;
    max_own = std::max(max_own, t);
  }
  TANDEM_CHECK(max_own > 0, "a core share needs at least one device with threads");
  TANDEM_CHECK(pool_ >= max_own, "a core pool of {} is smaller than a device's own {} threads",
               pool_, max_own);
}

int CoreShare::threads_for(int computing) const {
  return std::max(min_own_, pool_ / std::max(1, computing));
}

int CoreShare::begin(int device) {
  TANDEM_ASSERT(device >= 0 && device < static_cast<int>(own_.size()) && own_[device] > 0,
                "device {} is not in the core share", device);
  std::lock_guard<std::mutex> lock(mu_);
  ++computing_;
  set_blas_locked();
  return blas_;
}

void CoreShare::end(int device) {
  // The BLAS pool does not grow here: a device that waits only a moment (for a message) would
  // begin again while another one multiplies on its cores, and a product whose threads share
  // a core with other work waits for the slowest of them. Cores come back at the next begin.
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_ASSERT(computing_ > 0, "device {} ends computing, but none began", device);
  --computing_;
}

void CoreShare::set_blas_locked() {
  // One pool for all devices. A product already running keeps its threads until it returns
  // (a few ms at most); the devices' next products take the new size.
  const int want = threads_for(computing_);
  if (want == blas_) return;
  blas_ = want;
  set_blas_threads(want);
}

int CoreShare::computing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return computing_;
}

int CoreShare::blas_threads_set() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blas_;
}

}  // namespace tandem
