#include "tandem/graph/deferred.h"

namespace tandem::graph {

void DeferredWeightGrads::push(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  work_.push_back(std::move(work));
}

void DeferredWeightGrads::run_all() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(work_);
  }
  for (auto& w : work) w();
}

size_t DeferredWeightGrads::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return work_.size();
}

}  // namespace tandem::graph
