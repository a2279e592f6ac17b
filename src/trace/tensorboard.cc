// EventWriter and read_scalars from tensorboard.h.
#include "tandem/trace/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "tandem/common/check.h"
#include "trace/tfrecord.h"

namespace tandem::trace {
namespace {

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventWriter::EventWriter(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  TANDEM_CHECK(!error, "could not create the TensorBoard folder {}: {}", dir, error.message());
  static std::atomic<int> counter{0};
  const double now = unix_seconds();
  path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{:010d}.{}.{}.{}",
                                                    static_cast<long long>(now), hostname(),
                                                    static_cast<long long>(getpid()), counter++))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  TANDEM_CHECK(file_ != nullptr, "could not write {}: {}", path_, std::strerror(errno));
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    write(encode_file_version_event(now));
  } catch (...) {
    std::fclose(file_);  // the destructor does not run for a throwing constructor
    throw;
  }
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);  // close() reports errors; a destructor cannot
}

void EventWriter::add_scalar(const std::string& tag, float value, int64_t step, double wall_time) {
  std::lock_guard<std::mutex> lock(mutex_);
  write(encode_scalar_event(tag, value, step, wall_time));
}

void EventWriter::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(file_ != nullptr, "{} was closed before its last flush", path_);
  if (std::fflush(file_) != 0) fail(std::strerror(errno));
}

void EventWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  const bool flushed = std::fflush(file_) == 0;
  const int flush_errno = errno;
  std::FILE* file = std::exchange(file_, nullptr);
  const bool closed = std::fclose(file) == 0;
  if (!flushed || !closed) fail(std::strerror(flushed ? errno : flush_errno));
}

void EventWriter::write(const std::string& event) {
  TANDEM_CHECK(file_ != nullptr, "{} was closed before this event", path_);
  const std::string record = frame_record(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    fail(std::strerror(errno));
}

void EventWriter::fail(const std::string& reason) {
  if (file_ != nullptr) std::fclose(std::exchange(file_, nullptr));
  // A file that nothing reached is removed: an empty event file would only mislead.
  std::error_code ec;
  if (std::filesystem::file_size(path_, ec) == 0 && !ec) std::filesystem::remove(path_, ec);
  throw Error(fmt::format("could not write {}: {}", path_, reason));
}

std::vector<ScalarRecord> read_scalars(const std::string& path) {
  std::vector<ScalarRecord> scalars;
  for (const std::string& record : read_records(path)) {
    DecodedEvent event;
    try {
      event = decode_event(record);
    } catch (const Error& e) {
      TANDEM_CHECK(false, "event file \"{}\": {}", path, e.what());
    }
    for (auto& [tag, value] : event.scalars)
      scalars.push_back({tag, value, event.step, event.wall_time});
  }
  return scalars;
}

}  // namespace tandem::trace
