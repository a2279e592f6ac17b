#include "mpi/progress_engine.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "mpi/wait_query.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

using Clock = std::chrono::steady_clock;

// Headers taken per iteration before the thread goes back to its other work.
constexpr int kMaxHeadersPerRound = 64;

[[noreturn]] void die(const std::string& prefix, const std::string& what) {
  std::fprintf(stderr, "%s MPI progress thread: %s\n", prefix.c_str(), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

}  // namespace

ProgressEngine::ProgressEngine(Options options, Mailbox& mailbox)
    : options_(std::move(options)), mailbox_(mailbox), wakeups_(options_.comm) {
  thread_ = std::thread([this] { loop(); });
}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wakeups_.post_self();
  thread_.join();
}

void ProgressEngine::submit(std::unique_ptr<Operation> op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TANDEM_ASSERT(!stop_, "MPI operation submitted while the transport shuts down");
    queue_.push_back(std::move(op));
  }
  wakeups_.post_self();
}

void ProgressEngine::call(std::function<void()> fn) {
  TANDEM_ASSERT(std::this_thread::get_id() != thread_.get_id(),
                "ProgressEngine::call from the progress thread would wait for itself");
  auto done = std::make_shared<Completion>();
  submit(make_call(std::move(fn), done));
  done->wait(Clock::time_point::max(), {});
}

void ProgressEngine::wake() { wakeups_.post_self(); }

void ProgressEngine::request_abort(int exit_status) {
  abort_status_.store(exit_status);
  abort_requested_.store(true);
  wake();
}

void ProgressEngine::loop() {
  std::vector<std::unique_ptr<Operation>> active;
  Request shutdown_barrier;
  bool barrier_posted = false;
  Clock::time_point give_up = Clock::time_point::max();
  Clock::time_point last_progress = Clock::now();
#ifdef __linux__
  // Sleep as long as asked, not up to 50 µs more (the default timer slack): the sleeps below
  // are what a waiting receiver's latency is made of.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  try {
    for (;;) {
      if (abort_requested_.load()) MPI_Abort(MPI_COMM_WORLD, abort_status_.load());
      std::vector<std::unique_ptr<Operation>> fresh;
      bool stopping = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        fresh.swap(queue_);
        stopping = stop_;
      }
      bool progressed = !fresh.empty();
      for (auto& op : fresh) {
        op->start();
        wakeups_.post(op->wakes());
        active.push_back(std::move(op));
      }
      progressed |= receive_headers(active);
      progressed |= answer_wait_questions(options_.comm, mailbox_, active);
      auto finished =
          std::remove_if(active.begin(), active.end(),
                         [](const std::unique_ptr<Operation>& op) { return op->test(); });
      progressed |= finished != active.end();
      active.erase(finished, active.end());

      if (stopping) {
        if (give_up == Clock::time_point::max()) {
          give_up =
              Clock::now() + std::chrono::duration_cast<Clock::duration>(options_.shutdown_timeout);
        }
        // Our sends are complete (received, or buffered by MPI) and our receives are filed:
        // tell the others, and keep receiving until they all say the same.
        if (!barrier_posted && active.empty()) {
          check_mpi(MPI_Ibarrier(options_.comm, shutdown_barrier.ptr()), "MPI_Ibarrier");
          barrier_posted = true;
        }
        if (barrier_posted && shutdown_barrier.test() && active.empty()) break;
        if (Clock::now() >= give_up) {
          std::fprintf(stderr,
                       "%s MPI transport: not every rank reached shutdown within %.0f s; "
                       "leaving %zu operations in flight\n",
                       options_.prefix.c_str(), options_.shutdown_timeout.count(), active.size());
          // Leak what MPI may still write or read: buffers and requests (OpenMPI cannot free
          // an active non-blocking barrier). The process is in trouble anyway.
          for (auto& op : active) op.release();
          if (barrier_posted) new Request(std::move(shutdown_barrier));
          break;
        }
      }
      if (progressed) {
        last_progress = Clock::now();
      } else {
        int64_t bytes_in_flight = 0;
        for (const auto& op : active) bytes_in_flight += op->bytes();
        if (idle_wait(Clock::now() - last_progress, stopping || !active.empty(), bytes_in_flight))
          last_progress = Clock::now();
      }
    }
  } catch (const std::exception& e) {
    die(options_.prefix, e.what());
  }
}

bool ProgressEngine::receive_headers(std::vector<std::unique_ptr<Operation>>& active) {
  for (int n = 0; n < kMaxHeadersPerRound; ++n) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kHeaderTag, options_.comm, &found, &message, &status),
              "MPI_Improbe");
    if (!found) return n > 0;
    int count = 0;
    check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    std::vector<char> bytes(count);
    check_mpi(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
    auto op = make_receive(options_.comm, status.MPI_SOURCE, decode_header(bytes.data(), count),
                           options_.receive_target, mailbox_);
    op->start();
    active.push_back(std::move(op));
  }
  return true;
}

bool ProgressEngine::idle_wait(Clock::duration idle_for, bool in_flight, int64_t bytes_in_flight) {
  using std::chrono::microseconds;
  // Busy (operations in flight, or receivers waiting): keep polling, yielding in between, for
  // 200 µs without progress, or as long as the bytes in flight take at 1 GB/s if longer. Large
  // messages move in fragments that advance only while both sides call MPI, and finishing an
  // operation is the only progress this loop sees. Then sleep 50 µs doubling to 200 µs while
  // operations are in flight or receivers wait for a rank that cannot wake this one; else (idle,
  // or receivers waiting only for ranks that wake this one when they send) up to 2 ms. Polling
  // costs little where this rank has its own cores, but ranks that share cores take each
  // poll's time from a rank that computes.
  const bool receivers = mailbox_.waiting() > 0;
  const microseconds spin = std::max(microseconds(200), microseconds(bytes_in_flight / 1000));
  if ((in_flight || receivers) && idle_for < spin) {
    std::this_thread::yield();
    return false;
  }
  const bool poll =
      in_flight ||
      (receivers && !mailbox_.waits_only_for([this](int peer) { return wakeups_.woken_by(peer); }));
  const auto idle_us = std::chrono::duration_cast<microseconds>(idle_for).count();
  const microseconds pause = std::clamp(microseconds(idle_us / 4), microseconds(50),
                                        poll ? microseconds(200) : microseconds(2000));
  return wakeups_.wait(pause);
}

}  // namespace tandem::mpi
