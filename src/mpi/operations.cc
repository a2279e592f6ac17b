#include "mpi/operations.h"

#include <algorithm>
#include <limits>

#include "tandem/common/check.h"

namespace tandem::mpi {

void Completion::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

Completion::Outcome Completion::wait(Clock::time_point deadline,
                                     const std::function<bool()>& aborted) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (done_) {
      if (error_) std::rethrow_exception(error_);
      return Outcome::kDone;
    }
    if (aborted && aborted()) return Outcome::kAborted;
    auto now = Clock::now();
    if (now >= deadline) return Outcome::kTimedOut;
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

namespace {

bool test_all(std::vector<Request>& requests) {
  bool done = true;
  for (auto& r : requests) done = r.test() && done;
  return done;
}

char* bytes_of(const torch::Tensor& t) { return static_cast<char*>(t.data_ptr()); }

class SendOp : public Operation {
 public:
  SendOp(MPI_Comm comm, int peer, std::vector<char> header, torch::Tensor payload)
      : comm_(comm), peer_(peer), header_(std::move(header)), payload_(std::move(payload)) {}

  void start() override {
    int64_t nbytes = payload_.numel() * static_cast<int64_t>(payload_.element_size());
    int64_t chunks = chunk_count(nbytes);
    requests_.resize(1 + chunks);
    check_mpi(MPI_Isend(header_.data(), static_cast<int>(header_.size()), MPI_BYTE, peer_,
                        kHeaderTag, comm_, requests_[0].ptr()),
              "MPI_Isend");
    for (int64_t i = 0; i < chunks; ++i) {
      check_mpi(MPI_Isend(bytes_of(payload_) + i * kMaxChunkBytes, chunk_bytes(nbytes, i), MPI_BYTE,
                          peer_, kPayloadTag, comm_, requests_[1 + i].ptr()),
                "MPI_Isend");
    }
  }
  bool test() override { return test_all(requests_); }
  int64_t bytes() const override {
    return payload_.numel() * static_cast<int64_t>(payload_.element_size());
  }
  int wakes() const override { return peer_; }

 private:
  MPI_Comm comm_;
  int peer_;
  std::vector<char> header_;
  torch::Tensor payload_;
  std::vector<Request> requests_;
};

class ReceiveOp : public Operation {
 public:
  ReceiveOp(MPI_Comm comm, int peer, WireHeader header, const ReceiveTarget& target,
            Mailbox& mailbox)
      : comm_(comm), peer_(peer), header_(std::move(header)), mailbox_(mailbox) {
    const bool host = target.device.is_cpu();
    const bool pinned = host && target.pinned;
    buffer_ = host && !pinned && target.pool
                  ? target.pool->take(header_.sizes, header_.dtype)
                  : torch::empty(header_.sizes, torch::TensorOptions()
                                                    .dtype(header_.dtype)
                                                    .device(target.device)
                                                    .pinned_memory(pinned));
    int64_t expect = buffer_.numel() * static_cast<int64_t>(buffer_.element_size());
    TANDEM_CHECK(expect == header_.nbytes,
                 "message {} from rank {} announces {} bytes but its shape {} of {} needs {}",
                 header_.key.to_string(), peer_, header_.nbytes, header_.sizes,
                 c10::toString(header_.dtype), expect);
  }

  void start() override {
    int64_t chunks = chunk_count(header_.nbytes);
    requests_.resize(chunks);
    for (int64_t i = 0; i < chunks; ++i) {
      check_mpi(MPI_Irecv(bytes_of(buffer_) + i * kMaxChunkBytes, chunk_bytes(header_.nbytes, i),
                          MPI_BYTE, peer_, kPayloadTag, comm_, requests_[i].ptr()),
                "MPI_Irecv");
    }
  }
  bool test() override {
    if (!test_all(requests_)) return false;
    mailbox_.deliver(peer_, header_.key, std::move(buffer_));
    return true;
  }
  int64_t bytes() const override { return header_.nbytes; }

 private:
  MPI_Comm comm_;
  int peer_;
  WireHeader header_;
  Mailbox& mailbox_;
  torch::Tensor buffer_;
  std::vector<Request> requests_;
};

class AllReduceOp : public Operation {
 public:
  AllReduceOp(MPI_Comm comm, torch::Tensor buffer, MPI_Datatype type,
              std::shared_ptr<Completion> done)
      : comm_(comm), buffer_(std::move(buffer)), type_(type), done_(std::move(done)) {}

  // Non-blocking (MPI_Iallreduce) so the progress thread keeps moving point-to-point messages,
  // and can still end the job, while a slow replica catches up. Counts are ints: chunked.
  void start() override {
    const int64_t max_count = std::numeric_limits<int>::max() / 2;
    int64_t n = buffer_.numel();
    auto esize = static_cast<int64_t>(buffer_.element_size());
    for (int64_t off = 0; off < n; off += max_count) {
      requests_.emplace_back();
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, bytes_of(buffer_) + off * esize,
                               static_cast<int>(std::min(max_count, n - off)), type_, MPI_SUM,
                               comm_, requests_.back().ptr()),
                "MPI_Iallreduce");
    }
  }
  bool test() override {
    if (!test_all(requests_)) return false;
    done_->finish();
    return true;
  }
  int64_t bytes() const override {
    return buffer_.numel() * static_cast<int64_t>(buffer_.element_size());
  }

 private:
  MPI_Comm comm_;
  torch::Tensor buffer_;
  MPI_Datatype type_;
  std::shared_ptr<Completion> done_;
  std::vector<Request> requests_;
};

class CallOp : public Operation {
 public:
  CallOp(std::function<void()> fn, std::shared_ptr<Completion> done)
      : fn_(std::move(fn)), done_(std::move(done)) {}
  void start() override {
    try {
      fn_();
      done_->finish();
    } catch (...) {
      done_->finish(std::current_exception());
    }
  }
  bool test() override { return true; }

 private:
  std::function<void()> fn_;
  std::shared_ptr<Completion> done_;
};

}  // namespace

std::unique_ptr<Operation> make_send(MPI_Comm comm, int peer, std::vector<char> header,
                                     torch::Tensor payload) {
  return std::make_unique<SendOp>(comm, peer, std::move(header), std::move(payload));
}

std::unique_ptr<Operation> make_receive(MPI_Comm comm, int peer, WireHeader header,
                                        const ReceiveTarget& target, Mailbox& mailbox) {
  return std::make_unique<ReceiveOp>(comm, peer, std::move(header), target, mailbox);
}

std::unique_ptr<Operation> make_all_reduce(MPI_Comm comm, torch::Tensor buffer, MPI_Datatype type,
                                           std::shared_ptr<Completion> done) {
  return std::make_unique<AllReduceOp>(comm, std::move(buffer), type, std::move(done));
}

std::unique_ptr<Operation> make_call(std::function<void()> fn, std::shared_ptr<Completion> done) {
  return std::make_unique<CallOp>(std::move(fn), std::move(done));
}

}  // namespace tandem::mpi
