#include "tandem/transport/faulty.h"

#include <array>
#include <sstream>

#include "tandem/common/check.h"

namespace tandem::transport {
namespace {

using Clock = std::chrono::steady_clock;

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr std::array<KindName, 6> kKinds{{{FaultKind::kDrop, "drop"},
                                          {FaultKind::kDelay, "delay"},
                                          {FaultKind::kCorruptShape, "corrupt-shape"},
                                          {FaultKind::kCorruptDtype, "corrupt-dtype"},
                                          {FaultKind::kZero, "zero"},
                                          {FaultKind::kThrow, "throw"}}};

const char* kind_name(FaultKind kind) {
  for (const auto& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

int parse_int(const std::string& field, const std::string& value, const std::string& text) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  TANDEM_CHECK(used == value.size() && !value.empty(), "fault '{}': {}={} is not an integer", text,
               field, value);
  return v;
}

// Same-size partners: the bytes of one read as the other.
c10::ScalarType wrong_dtype_for(c10::ScalarType t) {
  using S = c10::ScalarType;
  switch (t) {
    case S::Float:
      return S::Int;
    case S::Int:
      return S::Float;
    case S::Double:
      return S::Long;
    case S::Long:
      return S::Double;
    case S::Half:
    case S::BFloat16:
      return S::Short;
    case S::Short:
      return S::Half;
    case S::Byte:
    case S::Bool:
      return S::Char;
    case S::Char:
      return S::Byte;
    default:
      TANDEM_CHECK(false, "corrupt-dtype: a {} tensor has no other dtype of its element size",
                   c10::toString(t));
      return t;  // not reached
  }
}

}  // namespace

bool MessageMatch::matches(int from, int to, const MessageKey& key) const {
  return (!tensor || *tensor == key.tensor) && (!step || *step == key.step) &&
         (!microbatch || *microbatch == key.microbatch) &&
         (!gradient || *gradient == key.gradient) &&
         (!from_stage || *from_stage == key.from_stage) &&
         (!to_stage || *to_stage == key.to_stage) && (!from_device || *from_device == from) &&
         (!to_device || *to_device == to);
}

std::string Fault::to_string() const {
  std::vector<std::string> fields;
  if (match.tensor) fields.push_back("tensor=" + *match.tensor);
  if (match.step) fields.push_back(fmt::format("step={}", *match.step));
  if (match.microbatch) fields.push_back(fmt::format("mb={}", *match.microbatch));
  if (match.gradient) fields.push_back(fmt::format("grad={}", *match.gradient ? 1 : 0));
  if (match.from_stage) fields.push_back(fmt::format("from-stage={}", *match.from_stage));
  if (match.to_stage) fields.push_back(fmt::format("to-stage={}", *match.to_stage));
  if (match.from_device) fields.push_back(fmt::format("from={}", *match.from_device));
  if (match.to_device) fields.push_back(fmt::format("to={}", *match.to_device));
  if (nth != 1) fields.push_back(fmt::format("nth={}", nth));
  if (kind == FaultKind::kDelay) fields.push_back(fmt::format("ms={}", delay.count()));
  std::string out = kind_name(kind);
  if (!fields.empty()) out += ":" + fmt::format("{}", fmt::join(fields, ","));
  return out;
}

Fault parse_fault(const std::string& text) {
  Fault f;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  bool known = false;
  for (const auto& k : kKinds) {
    if (kind == k.name) {
      f.kind = k.kind;
      known = true;
    }
  }
  TANDEM_CHECK(known,
               "fault '{}': unknown kind '{}'; use drop, delay, corrupt-shape, corrupt-dtype, "
               "zero or throw",
               text, kind);
  bool has_delay = false;
  std::stringstream fields(colon == std::string::npos ? "" : text.substr(colon + 1));
  std::string item;
  while (std::getline(fields, item, ',')) {
    const size_t eq = item.find('=');
    TANDEM_CHECK(eq != std::string::npos, "fault '{}': '{}' is not FIELD=VALUE", text, item);
    const std::string field = item.substr(0, eq), value = item.substr(eq + 1);
    if (field == "tensor") {
      f.match.tensor = value;
    } else if (field == "step") {
      f.match.step = parse_int(field, value, text);
    } else if (field == "mb") {
      f.match.microbatch = parse_int(field, value, text);
    } else if (field == "grad") {
      TANDEM_CHECK(value == "0" || value == "1", "fault '{}': grad={} must be 0 or 1", text, value);
      f.match.gradient = value == "1";
    } else if (field == "from-stage") {
      f.match.from_stage = parse_int(field, value, text);
    } else if (field == "to-stage") {
      f.match.to_stage = parse_int(field, value, text);
    } else if (field == "from") {
      f.match.from_device = parse_int(field, value, text);
    } else if (field == "to") {
      f.match.to_device = parse_int(field, value, text);
    } else if (field == "nth") {
      f.nth = parse_int(field, value, text);
      TANDEM_CHECK(f.nth >= 1, "fault '{}': nth={} must be at least 1", text, f.nth);
    } else if (field == "ms") {
      TANDEM_CHECK(f.kind == FaultKind::kDelay, "fault '{}': ms= is for delay faults only", text);
      f.delay = std::chrono::milliseconds(parse_int(field, value, text));
      TANDEM_CHECK(f.delay.count() >= 0, "fault '{}': ms={} must not be negative", text, value);
      has_delay = true;
    } else {
      TANDEM_CHECK(false,
                   "fault '{}': unknown field '{}'; use tensor, step, mb, grad, from-stage, "
                   "to-stage, from, to, nth or ms",
                   text, field);
    }
  }
  TANDEM_CHECK(f.kind != FaultKind::kDelay || has_delay,
               "fault '{}': a delay needs ms=MILLISECONDS", text);
  return f;
}

torch::Tensor with_wrong_shape(const torch::Tensor& tensor) {
  const int64_t n = tensor.numel();
  return tensor.dim() == 1 ? tensor.reshape({n, 1}) : tensor.reshape({n});
}

torch::Tensor with_wrong_dtype(const torch::Tensor& tensor) {
  return tensor.view(wrong_dtype_for(tensor.scalar_type()));
}

FaultyTransport::FaultyTransport(std::shared_ptr<Transport> inner, std::vector<Fault> faults)
    : inner_(std::move(inner)),
      faults_(std::move(faults)),
      matched_(faults_.size(), 0),
      fired_(faults_.size(), 0) {
  TANDEM_CHECK(inner_ != nullptr, "a FaultyTransport needs a transport to wrap");
  for (const Fault& f : faults_) {
    if (f.kind == FaultKind::kDelay) {
      delayer_ = std::thread([this] { deliver_delayed(); });
      break;
    }
  }
}

FaultyTransport::~FaultyTransport() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (delayer_.joinable()) delayer_.join();
}

void FaultyTransport::send(int from_device, int to_device, const MessageKey& key,
                           const torch::Tensor& tensor, ReadyEvent ready) {
  const Fault* fault = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < faults_.size(); ++i) {
      if (!faults_[i].match.matches(from_device, to_device, key)) continue;
      if (++matched_[i] == faults_[i].nth && !fault) {
        fault = &faults_[i];
        ++fired_[i];
      }
    }
    if (fault && fault->kind == FaultKind::kDelay) {
      held_.emplace(Clock::now() + fault->delay, Held{from_device, to_device, key, tensor, ready});
    }
  }
  if (!fault) return inner_->send(from_device, to_device, key, tensor, ready);
  switch (fault->kind) {
    case FaultKind::kDrop:
      return;
    case FaultKind::kDelay:
      cv_.notify_all();
      return;
    case FaultKind::kCorruptShape:
      return inner_->send(from_device, to_device, key, with_wrong_shape(tensor), ready);
    case FaultKind::kCorruptDtype:
      return inner_->send(from_device, to_device, key, with_wrong_dtype(tensor), ready);
    case FaultKind::kZero:
      return inner_->send(from_device, to_device, key, torch::zeros_like(tensor), ready);
    case FaultKind::kThrow:
      TANDEM_CHECK(false, "injected fault ({}): the send of {} from device {} to device {} failed",
                   fault->to_string(), key.to_string(), from_device, to_device);
  }
}

void FaultyTransport::deliver_delayed() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (held_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto due = held_.begin()->first;
    if (Clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    Held h = std::move(held_.begin()->second);
    held_.erase(held_.begin());
    // Delivered under the lock, so that reset() cannot slip between taking the message and
    // handing it on: a message is either discarded by reset() or delivered before it.
    try {
      inner_->send(h.from, h.to, h.key, h.tensor, h.ready);
    } catch (const std::exception&) {
      // Aborted (the receiver gave up and the step ended) or refused: the message is lost, as
      // a message that came too late is.
    }
  }
}

void FaultyTransport::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  held_.clear();
  inner_->reset();
}

int FaultyTransport::fired(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CHECK(i < fired_.size(), "fault {} does not exist; there are {}", i, fired_.size());
  return fired_[i];
}

size_t FaultyTransport::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace tandem::transport
