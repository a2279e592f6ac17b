// EventWriter and read_scalars from tensorboard.h.
#include "tandem/trace/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/output_path.h"
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
  file_ = std::make_unique<AppendedFile>(path_);
  std::lock_guard<std::mutex> lock(mutex_);
  write(encode_file_version_event(now));
}

// The file closes without a report (close() reports errors; a destructor cannot).
EventWriter::~EventWriter() = default;

void EventWriter::add_scalar(const std::string& tag, float value, int64_t step, double wall_time) {
  std::lock_guard<std::mutex> lock(mutex_);
  write(encode_scalar_event(tag, value, step, wall_time));
}

void EventWriter::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(file_ != nullptr, "{} was closed before its last flush", path_);
}

void EventWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  const std::unique_ptr<AppendedFile> file = std::move(file_);
  guarded([&] { file->close(); });
}

void EventWriter::write(const std::string& event) {
  TANDEM_CHECK(file_ != nullptr, "{} was closed before this event", path_);
  guarded([&] { file_->append(frame_record(event)); });
}

void EventWriter::guarded(const std::function<void()>& io) {
  try {
    io();
  } catch (const Error&) {
    file_.reset();
    // A file that nothing reached is removed: an empty event file would only mislead.
    std::error_code ec;
    if (std::filesystem::file_size(path_, ec) == 0 && !ec) std::filesystem::remove(path_, ec);
    throw;
  }
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
