// Event encoding and decoding for tensorboard.h; field numbers are listed there.
#include <optional>

#include "proto_wire.h"
#include "tandem/trace/tensorboard.h"

namespace tandem::trace {
namespace {

// Event fields.
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
// Summary and Summary.Value fields.
constexpr int kSummaryValue = 1, kTag = 1, kSimpleValue = 2;

void put_header(std::string& out, double wall_time, int64_t step) {
  if (wall_time != 0) wire::put_double(out, kWallTime, wall_time);
  if (step != 0) wire::put_int64(out, kStep, step);
}

// A Summary.Value that holds something other than a simple_value (an image, a histogram)
// gives nothing.
std::optional<std::pair<std::string, float>> decode_value(std::string_view bytes) {
  std::pair<std::string, float> value;
  bool simple = false;
  wire::Reader reader(bytes);
  int field;
  wire::WireType type;
  while (reader.next(field, type)) {
    if (field == kTag && type == wire::kLengthDelimited)
      value.first = std::string(reader.bytes());
    else if (field == kSimpleValue && type == wire::kFixed32)
      value.second = reader.fixed32_float(), simple = true;
    else
      reader.skip(type);
  }
  if (!simple) return std::nullopt;
  return value;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string out;
  put_header(out, wall_time, 0);
  wire::put_bytes(out, kFileVersion, "brain.Event:2");
  return out;
}

std::string encode_scalar_event(const std::string& tag, float value, int64_t step,
                                double wall_time) {
  std::string summary_value;
  wire::put_bytes(summary_value, kTag, tag);
  wire::put_float(summary_value, kSimpleValue, value);
  std::string summary;
  wire::put_bytes(summary, kSummaryValue, summary_value);
  std::string out;
  put_header(out, wall_time, step);
  wire::put_bytes(out, kSummary, summary);
  return out;
}

DecodedEvent decode_event(std::string_view bytes) {
  DecodedEvent event;
  wire::Reader reader(bytes);
  int field;
  wire::WireType type;
  while (reader.next(field, type)) {
    if (field == kWallTime && type == wire::kFixed64) {
      event.wall_time = reader.fixed64_double();
    } else if (field == kStep && type == wire::kVarint) {
      event.step = static_cast<int64_t>(reader.varint());
    } else if (field == kFileVersion && type == wire::kLengthDelimited) {
      event.file_version = std::string(reader.bytes());
    } else if (field == kSummary && type == wire::kLengthDelimited) {
      wire::Reader summary(reader.bytes());
      int f;
      wire::WireType t;
      while (summary.next(f, t)) {
        if (f != kSummaryValue || t != wire::kLengthDelimited) {
          summary.skip(t);
        } else if (auto value = decode_value(summary.bytes())) {
          event.scalars.push_back(std::move(*value));
        }
      }
    } else {
      reader.skip(type);
    }
  }
  return event;
}

}  // namespace tandem::trace
