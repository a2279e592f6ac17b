#include "tandem/memory/context.h"

#include <utility>

#include <fmt/format.h>

namespace tandem::memory {
namespace {

thread_local Where t_where;

}  // namespace

const Where& current_where() { return t_where; }

std::string describe(const Where& where) {
  std::string out;
  auto add = [&out](const std::string& part) {
    if (!out.empty()) out += ", ";
    out += part;
  };
  if (where.stage >= 0) add(fmt::format("stage {}", where.stage));
  if (!where.layer.empty()) add(fmt::format("layer {}", where.layer));

  std::string detail = where.phase;
  if (where.microbatch >= 0) {
    if (!detail.empty()) detail += ", ";
    detail += fmt::format("micro-batch {}", where.microbatch);
  }
  if (!detail.empty()) out += out.empty() ? detail : fmt::format(" ({})", detail);
  return out;
}

ScopedWhere::ScopedWhere(int device, std::string device_name) : kind_(Kind::kDevice) {
  saved_a_ = std::exchange(t_where.device, device);
  saved_text_ = std::exchange(t_where.device_name, std::move(device_name));
}

ScopedWhere::ScopedWhere(int stage, std::string phase, int microbatch) : kind_(Kind::kAction) {
  saved_a_ = std::exchange(t_where.stage, stage);
  saved_b_ = std::exchange(t_where.microbatch, microbatch);
  saved_text_ = std::exchange(t_where.phase, std::move(phase));
}

ScopedWhere::ScopedWhere(std::string layer) : kind_(Kind::kLayer) {
  saved_text_ = std::exchange(t_where.layer, std::move(layer));
}

ScopedWhere::~ScopedWhere() {
  switch (kind_) {
    case Kind::kDevice:
      t_where.device = saved_a_;
      t_where.device_name = std::move(saved_text_);
      break;
    case Kind::kAction:
      t_where.stage = saved_a_;
      t_where.microbatch = saved_b_;
      t_where.phase = std::move(saved_text_);
      break;
    case Kind::kLayer:
      t_where.layer = std::move(saved_text_);
      break;
  }
}

}  // namespace tandem::memory
