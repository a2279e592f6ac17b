// Unit tests of the MPI transport's pieces that need no peer: the header format, the mailbox,
// the layout and launcher detection. They run on every rank of the MPI test binary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/launcher.h"
#include "mpi/environment.h"
#include "mpi/layout.h"
#include "mpi/mailbox.h"
#include "mpi/wait_query.h"
#include "mpi/wire.h"
#include "tandem/common/check.h"

namespace tandem::mpi {
namespace {

using transport::MessageKey;
using namespace std::chrono_literals;

TEST(Wire, HeaderRoundTrip) {
  WireHeader h{MessageKey{"enc3.skip", 7, 3, true, 2, 1}, c10::kLong, {4, 0, 17}, 0};
  std::vector<char> bytes = encode_header(h);
  WireHeader back = decode_header(bytes.data(), bytes.size());
  EXPECT_EQ(back.key, h.key);
  EXPECT_EQ(back.dtype, c10::kLong);
  EXPECT_EQ(back.sizes, h.sizes);
  EXPECT_EQ(back.nbytes, 0);
}

TEST(Wire, RejectsTruncatedAndForeignHeaders) {
  WireHeader h{MessageKey{"x", 0, 0, false, 0, 1}, c10::kFloat, {2}, 8};
  std::vector<char> bytes = encode_header(h);
  EXPECT_THROW(decode_header(bytes.data(), bytes.size() - 1), Error);
  bytes[0] ^= 0x55;
  EXPECT_THROW(decode_header(bytes.data(), bytes.size()), Error);
}

// The receiver allocates a buffer from the header's shape and dtype and receives nbytes into
// it: a header whose fields disagree, or name no dtype, is refused before anything is
// allocated (an unknown dtype code used to go straight into torch::empty, and sizes whose
// product overflows to the announced byte count passed).
TEST(Wire, RefusesHeadersTheReceiverCouldNotAllocateFrom) {
  auto message = [](const WireHeader& h, const std::function<void(std::vector<char>&)>& edit) {
    std::vector<char> bytes = encode_header(h);
    if (edit) edit(bytes);
    try {
      decode_header(bytes.data(), bytes.size());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const MessageKey key{"x", 0, 0, false, 0, 1};
  EXPECT_EQ(message({key, c10::kFloat, {2, 3}, 24}, nullptr), "accepted");
  EXPECT_EQ(message({key, c10::kFloat, {2, 3}, 12}, nullptr),
            "a tensor message header announces 12 bytes for shape [2, 3] of Float, which is 24 "
            "bytes");
  EXPECT_EQ(message({key, c10::kFloat, {2, -3}, -24}, nullptr),
            "a tensor message header has a negative size -3");
  EXPECT_EQ(message({key, c10::kByte, {int64_t{1} << 40, int64_t{1} << 30}, 0}, nullptr),
            "a tensor message header announces more bytes than 2^63");
  constexpr size_t kGradientAt = 16, kDtypeAt = 33;  // see the layout in wire.h
  EXPECT_EQ(message({key, c10::kFloat, {1}, 4}, [](std::vector<char>& b) { b[kGradientAt] = 2; }),
            "a tensor message header has gradient flag 2, not 0 or 1");
  EXPECT_EQ(message({key, c10::kFloat, {1}, 4}, [](std::vector<char>& b) { b[kDtypeAt] = 99; }),
            "a tensor message header has dtype code 99, which is no dtype a tensor message "
            "carries");
  EXPECT_EQ(message({key, c10::ScalarType::Undefined, {1}, 4}, nullptr)
                .rfind("a tensor message header has dtype code", 0),
            0u);
}

TEST(Wire, ChunksCoverLargePayloads) {
  EXPECT_EQ(chunk_count(0), 0);
  EXPECT_EQ(chunk_count(1), 1);
  EXPECT_EQ(chunk_count(kMaxChunkBytes), 1);
  EXPECT_EQ(chunk_count(kMaxChunkBytes + 1), 2);
  EXPECT_EQ(chunk_bytes(kMaxChunkBytes + 5, 1), 5);
}

TEST(Mailbox, TakesByKeyWhateverTheArrivalOrder) {
  Mailbox box;
  MessageKey a{"a", 0, 0, false, 0, 1}, b{"b", 0, 0, false, 0, 1};
  box.deliver(3, a, torch::full({2}, 1.0));
  box.deliver(3, b, torch::full({2}, 2.0));
  auto soon = Mailbox::Clock::now() + 1s;
  EXPECT_EQ(box.take(3, b, soon)[0].item<double>(), 2.0);
  EXPECT_EQ(box.take(3, a, soon)[0].item<double>(), 1.0);
  // Same key from another peer is another message.
  box.deliver(4, a, torch::ones({1}));
  EXPECT_FALSE(box.take(3, a, Mailbox::Clock::now() + 10ms).defined());
  EXPECT_EQ(box.stashed(4).size(), 1u);
}

TEST(Mailbox, WaitsForALateMessage) {
  Mailbox box;
  MessageKey k{"late", 1, 0, true, 1, 0};
  // The message is delivered only once the receiver waits for it (a condition, not a delay).
  std::thread producer([&] {
    while (box.waiting() == 0) std::this_thread::yield();
    box.deliver(0, k, torch::arange(3));
  });
  torch::Tensor t = box.take(0, k, Mailbox::Clock::now() + 10s);
  producer.join();
  ASSERT_TRUE(t.defined());
  EXPECT_TRUE(t.equal(torch::arange(3)));
  EXPECT_EQ(box.waiting(), 0);
}

TEST(Mailbox, AbortWakesWaitersWithAborted) {
  Mailbox box;
  std::thread aborter([&] {
    while (box.waiting() == 0) std::this_thread::yield();
    EXPECT_TRUE(box.abort("stage 2 failed"));
    EXPECT_FALSE(box.abort("again"));
  });
  try {
    box.take(0, MessageKey{"never"}, Mailbox::Clock::now() + 30s);
    ADD_FAILURE() << "take returned after abort";
  } catch (const transport::Aborted& e) {
    EXPECT_NE(std::string(e.what()).find("stage 2 failed"), std::string::npos) << e.what();
  }
  aborter.join();
  EXPECT_TRUE(box.aborted());
  EXPECT_EQ(box.waiting(), 0);
  EXPECT_THROW(box.take(0, MessageKey{"later"}, Mailbox::Clock::now() + 1s), transport::Aborted);
}

// Every wait below ends by a delivery or by its own deadline passing in this thread; the 60 s
// deadlines are never waited out, they only keep a stalled machine from ending a wait early.
TEST(Mailbox, TellsWhatItWaitsForAndWhatItGaveUpOn) {
  Mailbox box;
  EXPECT_FALSE(box.longest_wait().has_value());
  MessageKey first{"first", 3, 0, false, 2, 1}, second{"second", 3, 1, false, 0, 1};
  std::thread older([&] { box.take(2, first, Mailbox::Clock::now() + 60s); });
  while (box.waiting() < 1) std::this_thread::yield();
  std::thread younger([&] { box.take(0, second, Mailbox::Clock::now() + 60s); });
  while (box.waiting() < 2) std::this_thread::yield();
  auto wait = box.longest_wait();
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->peer, 2);
  EXPECT_EQ(wait->key, first);
  EXPECT_FALSE(wait->gave_up);
  box.deliver(2, first, torch::ones({1}));
  older.join();  // the younger one is the longest wait now
  wait = box.longest_wait();
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->key, second);
  box.deliver(0, second, torch::ones({1}));
  younger.join();
  EXPECT_FALSE(box.longest_wait().has_value());
  // A receive whose deadline passes: what is left is that receive, until its message comes late.
  MessageKey late{"late", 4, 0, true, 3, 1};
  EXPECT_FALSE(box.take(3, late, Mailbox::Clock::now() + 10ms).defined());
  wait = box.longest_wait();
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->key, late);
  EXPECT_TRUE(wait->gave_up);
  EXPECT_FALSE(wait->arrived_since);
  box.deliver(3, late, torch::ones({1}));
  EXPECT_TRUE(box.longest_wait()->arrived_since);
}

TEST(WaitQuery, AnswerRoundTripAndTruncation) {
  WaitAnswer a{3, 2.5, true, false, "'h0' s1->s2 step 4 mb 0 fwd (run 4)"};
  std::vector<char> bytes = encode_wait_answer(77, a);
  auto [id, back] = decode_wait_answer(bytes.data(), bytes.size());
  EXPECT_EQ(id, 77u);
  EXPECT_EQ(back.waits_for, 3);
  EXPECT_EQ(back.seconds, 2.5);
  EXPECT_TRUE(back.gave_up);
  EXPECT_FALSE(back.arrived_since);
  EXPECT_EQ(back.key, a.key);
  for (size_t n : {size_t{0}, size_t{7}, bytes.size() - 1}) {
    EXPECT_THROW(decode_wait_answer(bytes.data(), n), Error) << n << " bytes";
  }
  bytes.push_back('x');
  EXPECT_THROW(decode_wait_answer(bytes.data(), bytes.size()), Error);
}

TEST(Layout, MapsRanksAndGroups) {
  Layout layout{3, 2};
  EXPECT_EQ(layout.rank_of(1, 2), 5);
  EXPECT_EQ(layout.replica_of(4), 1);
  EXPECT_EQ(layout.stage_device_of(4), 1);
  EXPECT_EQ(layout.data_parallel_group(4), (std::vector<int>{1, 4}));
  EXPECT_NO_THROW(layout.validate(6));
}

TEST(Layout, RefusesAWrongWorldSizeWithTheNumbers) {
  try {
    Layout{3, 2}.validate(4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("3 stage devices x 2 replicas need 6 ranks but the job has 4"),
              std::string::npos)
        << m;
  }
  EXPECT_THROW(Layout({0, 4}).validate(0), Error);
}

TEST(Environment, SeesTheLauncher) {
  EXPECT_TRUE(launched_by_mpi_launcher());
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(launched_world_size(), size);
}

}  // namespace
}  // namespace tandem::mpi
