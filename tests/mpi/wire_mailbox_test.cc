// Unit tests of the MPI transport's pieces that need no peer: the header format, the mailbox,
// the layout and launcher detection. They run on every rank of the MPI test binary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>

#include "tandem/common/check.h"
#include "tandem/common/launcher.h"
#include "tandem/mpi/environment.h"
#include "tandem/mpi/layout.h"
#include "tandem/mpi/mailbox.h"
#include "tandem/mpi/wire.h"

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
