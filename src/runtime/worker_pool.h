// One long-lived worker thread per local device. run() hands every worker a job, waits for all
// of them and returns their exceptions. Workers join in the destructor.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::runtime {

class WorkerPool {
 public:
  // `init(i)` runs once on worker i's thread before any job (thread budget, stream).
  WorkerPool(int workers, std::function<void(int)> init);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  // Runs job(i) on every worker i and waits for all. Returns the exceptions thrown, in worker
  // order (empty when all succeeded), so that the error reported when several devices fail at
  // once does not depend on timing. Not reentrant; call from one thread.
  std::vector<std::exception_ptr> run(const std::function<void(int)>& job);

 private:
  void loop(int index, const std::function<void(int)>& init);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int remaining_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;  // by worker; null where the job succeeded
};

}  // namespace tandem::runtime
