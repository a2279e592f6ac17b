#include "runtime/worker_pool.h"

namespace tandem::runtime {

WorkerPool::WorkerPool(int workers, std::function<void(int)> init) {
  threads_.reserve(workers);
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i, init] { loop(i, init); });
  // Wait until every worker ran its init (so later jobs see a ready thread).
  run([](int) {});
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::vector<std::exception_ptr> WorkerPool::run(const std::function<void(int)>& job) {
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &job;
  errors_.assign(size(), nullptr);
  remaining_ = size();
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return remaining_ == 0; });
  job_ = nullptr;
  std::vector<std::exception_ptr> errors;
  for (auto& e : errors_)
    if (e) errors.push_back(std::move(e));
  return errors;
}

void WorkerPool::loop(int index, const std::function<void(int)>& init) {
  std::exception_ptr init_error;
  try {
    init(index);
  } catch (...) {
    init_error = std::current_exception();
  }
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error = init_error;
    init_error = nullptr;
    if (!error) {
      try {
        (*job)(index);
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error) errors_[index] = error;
      if (--remaining_ == 0) cv_.notify_all();
    }
  }
}

}  // namespace tandem::runtime
