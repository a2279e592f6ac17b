#include <utility>

#include "tandem/trace/event.h"

namespace tandem::trace {

Recorder::Recorder() : origin_(std::chrono::steady_clock::now()) {}

double Recorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void Recorder::add(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.spans.push_back(std::move(span));
}

void Recorder::add(Counter counter) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.counters.push_back(std::move(counter));
}

void Recorder::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.metadata[key] = value;
}

Trace Recorder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  Trace out = std::move(trace_);
  trace_ = Trace{};
  return out;
}

ScopedSpan::ScopedSpan(Recorder& recorder, Span span)
    : recorder_(recorder), span_(std::move(span)) {
  span_.start_us = recorder_.now_us();
}

ScopedSpan::~ScopedSpan() {
  span_.dur_us = recorder_.now_us() - span_.start_us;
  recorder_.add(std::move(span_));
}

}  // namespace tandem::trace
