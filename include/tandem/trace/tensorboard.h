// A minimal TensorBoard event-file writer (scalars only) and a reader for it.
//
// TFRecord framing (tfrecord.h, by hand: no packaged library writes it without TensorFlow)
// around protobuf `Event` messages, encoded by the classes protoc writes at build time from
// src/trace/proto/tensorboard_event.proto (the fields tandem uses of TensorBoard's
// tensorflow/core/util/event.proto and summary.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The file starts with Event{wall_time, file_version: "brain.Event:2"}; every add_scalar
// appends Event{wall_time, step, summary{value{tag, simple_value}}}. Encoding follows proto3:
// a zero wall_time or step is left out, simple_value (a oneof member) is always written.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {
class AppendedFile;
}

namespace tandem::trace {

// Seconds since the Unix epoch, with sub-second precision (TensorBoard's wall_time).
double unix_seconds();

std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(const std::string& tag, float value, int64_t step,
                                double wall_time);

// The fields of an Event this reader understands; others are skipped.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;  // (tag, simple_value) per Summary.Value
};
// Throws tandem::Error on malformed protobuf.
DecodedEvent decode_event(std::string_view bytes);

struct ScalarRecord {
  std::string tag;
  float value = 0;
  int64_t step = 0;
  double wall_time = 0;
};

// Every scalar in the event file at `path`, in file order. Verifies both CRCs of every record;
// throws tandem::Error naming the file and byte offset on corruption.
std::vector<ScalarRecord> read_scalars(const std::string& path);

// Appends scalars to a new event file `events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>`
// in `dir` (created if missing). The pid and a per-process counter keep two writers started in
// the same second (two ranks on one host, or two runs) from sharing a file; TensorBoard
// reads any file whose name contains "tfevents".
// Thread-safe. Owns the file: close() flushes and closes it and says whether that worked; the
// destructor closes it without a word. Every failure to write throws Error "could not write
// PATH: <reason>", closes the file, and removes it when nothing reached it. Not copyable.
class EventWriter {
 public:
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void add_scalar(const std::string& tag, float value, int64_t step,
                  double wall_time = unix_seconds());
  // Checks that the file is still open: every record reaches the operating system as it is
  // added (TensorBoard sees it at once), and close() flushes them to disk.
  void flush();
  // Flushes and closes the file; nothing can be added afterwards.
  void close();
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);  // needs mutex_ held
  // Runs `io` on the file; when it throws ("could not write PATH: reason"), closes the file and
  // removes it if empty before passing the error on. Needs mutex_.
  void guarded(const std::function<void()>& io);

  std::mutex mutex_;
  std::string path_;
  std::unique_ptr<AppendedFile> file_;  // common/output_path.h; null once closed
};

}  // namespace tandem::trace
