#include "mpi/wait_query.h"

#include <cstring>

#include "bytes.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

using Clock = Mailbox::Clock;

// Takes a message of `tag` from `source` (MPI_ANY_SOURCE: any rank) that has arrived: its
// sender and bytes, or nothing when none has.
std::optional<std::pair<int, std::vector<char>>> take_arrived(MPI_Comm comm, int source, int tag) {
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  check_mpi(MPI_Improbe(source, tag, comm, &found, &message, &status), "MPI_Improbe");
  if (!found) return std::nullopt;
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  std::vector<char> bytes(count);
  check_mpi(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
  return std::make_pair(status.MPI_SOURCE, std::move(bytes));
}

// Sends a few bytes it owns, on one tag.
class BytesSendOp : public Operation {
 public:
  BytesSendOp(MPI_Comm comm, int peer, int tag, std::vector<char> bytes)
      : comm_(comm), peer_(peer), tag_(tag), bytes_(std::move(bytes)) {}
  void start() override {
    check_mpi(MPI_Isend(bytes_.data(), static_cast<int>(bytes_.size()), MPI_BYTE, peer_, tag_,
                        comm_, request_.ptr()),
              "MPI_Isend");
  }
  bool test() override { return request_.test(); }
  int wakes() const override { return peer_; }

 private:
  MPI_Comm comm_;
  int peer_;
  int tag_;
  std::vector<char> bytes_;
  Request request_;
};

class WaitQuestionOp : public Operation {
 public:
  WaitQuestionOp(MPI_Comm comm, int peer, std::shared_ptr<WaitQuestion> question)
      : comm_(comm), peer_(peer), question_(std::move(question)) {
    put<uint64_t>(bytes_, question_->id);
  }
  void start() override {
    check_mpi(MPI_Isend(bytes_.data(), static_cast<int>(bytes_.size()), MPI_BYTE, peer_,
                        kWaitQueryTag, comm_, request_.ptr()),
              "MPI_Isend");
  }
  int wakes() const override { return peer_; }
  bool test() override {
    const bool sent = request_.test();
    if (answered_ || question_->abandoned.load()) return sent;
    for (;;) {
      auto arrived = take_arrived(comm_, peer_, kWaitAnswerTag);
      if (!arrived) return false;
      const std::vector<char>& bytes = arrived->second;
      auto [id, answer] = decode_wait_answer(bytes.data(), bytes.size());
      if (id != question_->id) continue;  // the late answer to an abandoned question
      question_->answer = std::move(answer);
      answered_ = true;
      question_->done->finish();
      return sent;
    }
  }

 private:
  MPI_Comm comm_;
  int peer_;
  std::shared_ptr<WaitQuestion> question_;
  std::vector<char> bytes_;
  Request request_;
  bool answered_ = false;
};

}  // namespace

std::vector<char> encode_wait_answer(uint64_t id, const WaitAnswer& answer) {
  std::vector<char> out;
  put<uint64_t>(out, id);
  put<int32_t>(out, answer.waits_for);
  put<double>(out, answer.seconds);
  put<uint8_t>(out, answer.gave_up ? 1 : 0);
  put<uint8_t>(out, answer.arrived_since ? 1 : 0);
  put<uint32_t>(out, static_cast<uint32_t>(answer.key.size()));
  out.insert(out.end(), answer.key.begin(), answer.key.end());
  return out;
}

std::pair<uint64_t, WaitAnswer> decode_wait_answer(const char* data, size_t size) {
  ByteReader r(data, size, "a wait answer");
  WaitAnswer answer;
  const auto id = r.get<uint64_t>();
  answer.waits_for = r.get<int32_t>();
  answer.seconds = r.get<double>();
  answer.gave_up = r.get<uint8_t>() != 0;
  answer.arrived_since = r.get<uint8_t>() != 0;
  const auto n = r.get<uint32_t>();
  TANDEM_CHECK(n == r.left(), "a wait answer of {} bytes announces a key of {} bytes", size, n);
  answer.key = r.get_string(n);
  return {id, std::move(answer)};
}

std::unique_ptr<Operation> make_wait_question(MPI_Comm comm, int peer,
                                              std::shared_ptr<WaitQuestion> question) {
  return std::make_unique<WaitQuestionOp>(comm, peer, std::move(question));
}

bool answer_wait_questions(MPI_Comm comm, const Mailbox& mailbox,
                           std::vector<std::unique_ptr<Operation>>& active) {
  bool any = false;
  for (;;) {
    auto arrived = take_arrived(comm, MPI_ANY_SOURCE, kWaitQueryTag);
    if (!arrived) return any;
    any = true;
    const auto& [from, bytes] = *arrived;
    TANDEM_CHECK(bytes.size() == sizeof(uint64_t),
                 "a question from rank {} of what this rank waits for has {} bytes, not {}", from,
                 bytes.size(), sizeof(uint64_t));
    uint64_t id = 0;
    std::memcpy(&id, bytes.data(), sizeof id);
    WaitAnswer answer;
    if (auto wait = mailbox.longest_wait()) {
      answer.waits_for = wait->peer;
      answer.seconds = std::chrono::duration<double>(Clock::now() - wait->since).count();
      answer.gave_up = wait->gave_up;
      answer.arrived_since = wait->arrived_since;
      answer.key = wait->key.to_string();
    }
    auto op =
        std::make_unique<BytesSendOp>(comm, from, kWaitAnswerTag, encode_wait_answer(id, answer));
    op->start();
    active.push_back(std::move(op));
  }
}

}  // namespace tandem::mpi
