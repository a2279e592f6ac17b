#include "tandem/trace/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "tandem/common/check.h"

namespace tandem::trace {
namespace {

constexpr int kBarWidth = 30;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// 4 significant digits, but no exponent for large counts such as samples/s.
std::string format_value(double v) {
  if (std::isfinite(v) && std::abs(v) >= 1000 && std::abs(v) < 1e15)
    return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

int terminal_width(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;
}

}  // namespace

Progress::Progress(Mode mode, int64_t total_steps, std::FILE* out, Clock clock,
                   double min_interval_s)
    : mode_(out == nullptr ? Mode::kNone : mode),
      total_(total_steps),
      out_(out),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      min_interval_s_(min_interval_s),
      start_s_(clock_()) {
  const bool tty = out_ != nullptr && isatty(fileno(out_));
  if (mode_ == Mode::kAuto) mode_ = tty ? Mode::kBar : Mode::kLine;
  if (mode_ == Mode::kBar && tty) width_ = terminal_width(out_);
}

Progress::~Progress() { finish(); }

std::string Progress::render(int64_t step, double elapsed_s, const Values& values) const {
  const bool known = total_ > 0;
  const double fraction = known ? std::min(1.0, std::max(0.0, double(step) / double(total_))) : 0;
  const bool has_rate = elapsed_s > 0 && step > 0;
  const double rate = has_rate ? step / elapsed_s : 0;
  const std::string rate_text =
      has_rate ? fmt::format("{:.3g} {}/s", rate, units_) : fmt::format("? {}/s", units_);
  const std::string eta = has_rate && known ? format_duration((total_ - step) / rate) : "?";
  std::string text;
  if (mode_ == Mode::kBar) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    if (known) {
      text = fmt::format("{:3.0f}%|{}{}| {}/{} [{}<{}, {}]", 100 * fraction,
                         std::string(filled, '#'), std::string(kBarWidth - filled, ' '), step,
                         total_, format_duration(elapsed_s), eta, rate_text);
    } else {
      text = fmt::format("{} {} [{}, {}]", step, units_, format_duration(elapsed_s), rate_text);
    }
  } else {
    text = known ? fmt::format("{} {}/{} ({:.0f}%) elapsed {} eta {} {}", unit_, step, total_,
                               100 * fraction, format_duration(elapsed_s), eta, rate_text)
                 : fmt::format("{} {} elapsed {} {}", unit_, step, format_duration(elapsed_s),
                               rate_text);
  }
  for (const auto& [key, value] : values) text += fmt::format(" {}={}", key, format_value(value));
  return text;
}

void Progress::update(int64_t step, const Values& values) {
  if (mode_ == Mode::kNone || finished_) return;
  step_ = step;
  values_ = values;
  const double now = clock_();
  const bool last = total_ > 0 && step >= total_;
  if (printed_ && !last && now - last_print_s_ < min_interval_s_) {
    pending_ = true;
    return;
  }
  print(now);
}

void Progress::print(double now) {
  std::string text = render(step_, now - start_s_, values_);
  if (mode_ == Mode::kBar) {
    // A line longer than the terminal wraps, and "\r" would then redraw only its last row.
    if (width_ > 1 && static_cast<int>(text.size()) >= width_) text.resize(width_ - 1);
    std::fprintf(out_, "\r%s\x1b[K", text.c_str());  // ESC[K clears what a longer line left
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  printed_ = true;
  pending_ = false;
  last_print_s_ = now;
}

void Progress::finish() {
  if (mode_ == Mode::kNone || finished_) return;
  finished_ = true;
  if (pending_) print(clock_());
  if (mode_ == Mode::kBar && printed_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

}  // namespace tandem::trace
