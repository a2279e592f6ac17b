// Where arrived tensor messages wait for their receiver (an internal part of MpiTransport).
//
// Messages are filed under (peer rank, MessageKey), so a receiver gets exactly the message it
// asks for whatever order messages arrived in; early arrivals simply stay here until taken.
// Two messages with the same peer and key are kept in arrival order.
//
// Thread-safety: every method is thread-safe. deliver() is called by the progress thread (or by
// a sender to itself), take() by the runtime's worker threads.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/transport/transport.h"

namespace tandem::mpi {

class Mailbox {
 public:
  using Clock = std::chrono::steady_clock;

  // `on_wait` (may be empty) runs whenever a receiver is about to block, outside the lock: the
  // transport uses it to make the progress thread poll at once.
  explicit Mailbox(std::function<void()> on_wait = {}) : on_wait_(std::move(on_wait)) {}

  void deliver(int peer, const transport::MessageKey& key, torch::Tensor tensor);

  // Blocks until message `key` from `peer` is here, removes and returns it. Returns an
  // undefined tensor when `deadline` passes first. Throws transport::Aborted after abort().
  torch::Tensor take(int peer, const transport::MessageKey& key, Clock::time_point deadline);

  // Wakes every waiting take() with Aborted, and fails every later one. Returns true for the
  // call that aborted (the first).
  bool abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }

  // Receivers blocked in take() right now.
  int waiting() const { return waiting_.load(); }
  // Whether every receiver blocked in take() right now waits for a peer that `wakes` holds
  // true for (true when none waits).
  bool waits_only_for(const std::function<bool(int)>& wakes) const;
  // The keys of messages from `peer` that arrived and were not taken (for error messages).
  std::vector<transport::MessageKey> stashed(int peer) const;

  // A receiver blocked in take(): what it waits for, and since when.
  struct Wait {
    int peer = -1;
    transport::MessageKey key;
    Clock::time_point since;
    bool gave_up = false;        // its deadline passed: the message never came
    bool arrived_since = false;  // gave up, and the message came after the deadline
  };
  // What this rank tells a peer that asks why it is silent (wait_query.h): the receiver that
  // has waited longest right now, or else the last one whose deadline passed (a rank whose
  // receive timed out stays stuck on it while it reports and ends the job), or nothing.
  std::optional<Wait> longest_wait() const;

 private:
  std::function<void()> on_wait_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, transport::MessageKey>, std::deque<torch::Tensor>> stash_;
  std::atomic<bool> aborted_{false};
  std::string reason_;  // guarded by mu_
  std::atomic<int> waiting_{0};
  std::list<Wait> waits_;        // guarded by mu_; oldest first
  std::optional<Wait> gave_up_;  // guarded by mu_
};

}  // namespace tandem::mpi
