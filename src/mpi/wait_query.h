// Asking a peer what it waits for (an internal part of MpiTransport).
//
// When a receive times out, the silent peer is often not the culprit: it may itself wait for
// a message from a third rank that stopped, hangs or died. Before it reports, the timed-out
// rank asks the peer, then the peer's peer, and so on, and names the end of that chain: the
// rank that does not answer, the rank that waits for nothing (it computes or sits in a
// collective), or a cycle of ranks waiting on each other.
//
// Every rank's progress thread answers questions while its workers compute or wait, so a
// live rank answers within a polling interval. A question (tag kWaitQueryTag) carries a
// number; the answer (kWaitAnswerTag) repeats it, so an answer that arrives after the asker
// gave up is recognised and dropped by a later question.
//
//   question: u64 id
//   answer:   u64 id | i32 waits_for (the peer rank, -1 for nothing) | f64 seconds waited |
//             u8 gave up | u8 arrived since | u32 key length | key text
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpi/mailbox.h"
#include "mpi/operations.h"

namespace tandem::mpi {

inline constexpr int kWaitQueryTag = 7003;
inline constexpr int kWaitAnswerTag = 7004;

struct WaitAnswer {
  int waits_for = -1;  // the rank whose message it waits for; -1: it waits for no message
  double seconds = 0.0;
  bool gave_up = false;        // it stopped waiting at its own timeout (and is ending the job)
  bool arrived_since = false;  // gave up, and the message arrived after its deadline
  std::string key;             // the message, as MessageKey::to_string() writes it
};

std::vector<char> encode_wait_answer(uint64_t id, const WaitAnswer& answer);
// Throws tandem::Error on bytes that are not an answer.
std::pair<uint64_t, WaitAnswer> decode_wait_answer(const char* data, size_t size);

// Where a question's answer lands. The asker sets `abandoned` when it stops waiting, so the
// operation ends without one.
struct WaitQuestion {
  uint64_t id = 0;
  std::shared_ptr<Completion> done = std::make_shared<Completion>();
  std::optional<WaitAnswer> answer;  // set before done->finish()
  std::atomic<bool> abandoned{false};
};

// Sends the question to `peer` and waits (polling, never blocking) for its answer.
std::unique_ptr<Operation> make_wait_question(MPI_Comm comm, int peer,
                                              std::shared_ptr<WaitQuestion> question);

// Answers every question that has arrived on `comm` from what `mailbox` says this rank waits
// for, adding the answer sends to `active`. Returns whether there was any. Progress thread.
bool answer_wait_questions(MPI_Comm comm, const Mailbox& mailbox,
                           std::vector<std::unique_ptr<Operation>>& active);

}  // namespace tandem::mpi
