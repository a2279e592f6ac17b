#include "tandem/trace/tensorboard.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>

#include "scratch.h"
#include "tandem/common/check.h"
#include "trace/tfrecord.h"

namespace tandem::trace {
namespace {

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The message of the Error `body` throws ("" for none).
std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string fresh_dir(const std::string& name) {
  // Per process: suites of two checkouts may run at once on one machine.
  const std::string dir = testing::scratch_path("tandem_tb_", name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Golden bytes from `protoc --encode=Event` on the messages listed in tensorboard.h.
TEST(TensorBoard, ScalarEventGoldenBytes) {
  EXPECT_EQ(encode_scalar_event("loss", 0.5f, 3, 1.5), unhex("09000000000000f83f"
                                                             "1003"
                                                             "2a0d"
                                                             "0a0b"
                                                             "0a046c6f7373"
                                                             "150000003f"));
}

TEST(TensorBoard, FileVersionEventGoldenBytes) {
  EXPECT_EQ(encode_file_version_event(1.5),
            unhex("09000000000000f83f1a0d627261696e2e4576656e743a32"));
}

TEST(TensorBoard, ZeroStepIsLeftOutLikeProto3) {
  EXPECT_EQ(encode_scalar_event("a", 0.0f, 0, 1.5), unhex("09000000000000f83f"
                                                          "2a0a"
                                                          "0a08"
                                                          "0a0161"
                                                          "1500000000"));
}

TEST(TensorBoard, DecodesNegativeStepsAndSeveralValues) {
  // protoc: wall_time 1700000000.25, step -2, values a=0 and b=-1.25.
  DecodedEvent event =
      decode_event(unhex("0900001040fc54d941"
                         "10feffffffffffffffff01"
                         "2a14"
                         "0a08"
                         "0a0161"
                         "1500000000"
                         "0a08"
                         "0a0162"
                         "150000a0bf"));
  EXPECT_EQ(event.wall_time, 1700000000.25);
  EXPECT_EQ(event.step, -2);
  ASSERT_EQ(event.scalars.size(), 2u);
  EXPECT_EQ(event.scalars[0], (std::pair<std::string, float>{"a", 0.0f}));
  EXPECT_EQ(event.scalars[1], (std::pair<std::string, float>{"b", -1.25f}));
}

TEST(TensorBoard, MalformedEventThrows) {
  std::string event = encode_scalar_event("loss", 0.5f, 3, 1.5);
  EXPECT_THROW(decode_event(event.substr(0, event.size() - 2)), Error);
}

TEST(TensorBoard, WriterRoundTrip) {
  const std::string dir = fresh_dir("roundtrip");
  std::string path;
  double before = 0, after = 0;
  {
    EventWriter writer(dir + "/nested");
    path = writer.path();
    writer.add_scalar("loss", 2.25f, 1, 100.0);
    writer.add_scalar("samples/s", 1234.5f, 2, 101.0);
    before = unix_seconds();
    writer.add_scalar("loss", -0.0625f, 3);
    after = unix_seconds();
  }
  const std::string name = std::filesystem::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const auto records = read_records(path);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(decode_event(records[0]).file_version, "brain.Event:2");
  const auto scalars = read_scalars(path);
  ASSERT_EQ(scalars.size(), 3u);
  EXPECT_EQ(scalars[0].tag, "loss");
  EXPECT_EQ(scalars[0].value, 2.25f);
  EXPECT_EQ(scalars[0].step, 1);
  EXPECT_EQ(scalars[0].wall_time, 100.0);
  EXPECT_EQ(scalars[1].tag, "samples/s");
  EXPECT_EQ(scalars[1].value, 1234.5f);
  EXPECT_EQ(scalars[2].value, -0.0625f);
  EXPECT_GE(scalars[2].wall_time, before);  // defaulted to the time of the call
  EXPECT_LE(scalars[2].wall_time, after);
}

TEST(TensorBoard, FlushMakesRecordsReadableWhileOpen) {
  EventWriter writer(fresh_dir("flush"));
  writer.add_scalar("loss", 1.0f, 1);
  writer.flush();
  EXPECT_EQ(read_scalars(writer.path()).size(), 1u);
}

TEST(TensorBoard, TwoWritersGetTwoFiles) {
  const std::string dir = fresh_dir("two");
  EventWriter a(dir), b(dir);
  EXPECT_NE(a.path(), b.path());
}

TEST(TensorBoard, CorruptByteInFileIsDetected) {
  std::string path;
  {
    EventWriter writer(fresh_dir("corrupt"));
    path = writer.path();
    writer.add_scalar("loss", 0.5f, 7, 1.5);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 6] ^= 0x10;  // inside the float of the last record
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    read_scalars(path);
    FAIL() << "expected tandem::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt data"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(TensorBoard, ConcurrentWritersKeepEveryRecordIntact) {
  EventWriter writer(fresh_dir("threads"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&writer, t] {
      for (int i = 0; i < 250; ++i) writer.add_scalar("t" + std::to_string(t), float(i), i, 1.0);
    });
  for (auto& thread : threads) thread.join();
  writer.flush();
  EXPECT_EQ(read_scalars(writer.path()).size(), 1000u);
}

// Runs `body` under a file-size limit of `bytes` (RLIMIT_FSIZE, SIGXFSZ ignored: what a full
// disk does to a write); returns the message of the Error it threw ("" for none).
std::string under_file_limit(rlim_t bytes, const std::function<void()>& body) {
  rlimit old{};
  EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit limit = old;
  limit.rlim_cur = bytes;
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string error;
  try {
    body();
  } catch (const Error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  return error;
}

// A full disk says so at the record that does not fit: the writer reports it, closes the file
// and takes no more records; the records written before stay readable.
TEST(TensorBoard, AFailedWriteIsReportedAndTheRecordsBeforeItStay) {
  EventWriter writer(fresh_dir("full"));
  for (int i = 0; i < 3; ++i) writer.add_scalar("loss", 1.0f, i, 1.0);
  const auto size = static_cast<rlim_t>(std::filesystem::file_size(writer.path()));
  EXPECT_EQ(under_file_limit(size, [&] { writer.add_scalar("loss", 1.0f, 3, 1.0); }),
            "could not write " + writer.path() + ": " + std::strerror(EFBIG));
  EXPECT_EQ(read_scalars(writer.path()).size(), 3u);
  EXPECT_EQ(error_message([&] { writer.add_scalar("loss", 1.0f, 4, 1.0); }),
            writer.path() + " was closed before this event");
  EXPECT_EQ(error_message([&] { writer.close(); }), "");  // closed already
}

// A file that nothing reached is not left behind.
TEST(TensorBoard, AWriterThatCouldNotStartLeavesNoEmptyFile) {
  const std::string dir = fresh_dir("none");
  std::filesystem::create_directories(dir);
  const std::string error = under_file_limit(0, [&] { EventWriter writer(dir); });
  EXPECT_EQ(error.rfind("could not write " + dir, 0), 0u) << error;
  EXPECT_NE(error.find(std::strerror(EFBIG)), std::string::npos) << error;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace
}  // namespace tandem::trace
