// Event encoding and decoding for tensorboard.h, by the classes protoc writes from
// proto/tensorboard_event.proto.
#include <google/protobuf/message_lite.h>

#include "tandem/common/check.h"
#include "tandem/trace/tensorboard.h"
#include "tensorboard_event.pb.h"

namespace tandem::trace {
namespace {

namespace pb = tensorboard;

std::string serialized(const pb::Event& event) {
  std::string out;
  TANDEM_ASSERT(event.SerializeToString(&out), "a TensorBoard event that cannot be serialized");
  return out;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  return serialized(event);
}

std::string encode_scalar_event(const std::string& tag, float value, int64_t step,
                                double wall_time) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return serialized(event);
}

DecodedEvent decode_event(std::string_view bytes) {
  pb::Event event;
  TANDEM_CHECK(event.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
               "a TensorBoard event of {} bytes is not a valid Event message", bytes.size());
  DecodedEvent out;
  out.wall_time = event.wall_time();
  out.step = event.step();
  if (event.has_file_version()) out.file_version = event.file_version();
  // A Summary.Value that holds something other than a simple_value (an image, a histogram)
  // gives nothing.
  if (event.has_summary())
    for (const pb::Summary::Value& v : event.summary().value())
      if (v.has_simple_value()) out.scalars.emplace_back(v.tag(), v.simple_value());
  return out;
}

}  // namespace tandem::trace
