#include "tandem/schedule/action.h"

#include <fmt/format.h>

#include <cctype>
#include <functional>
#include <ostream>

#include "tandem/common/check.h"

namespace tandem::schedule {

std::size_t ActionHash::operator()(const Action& a) const {
  std::size_t h = std::hash<int>()(a.stage);
  auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(std::hash<int>()(a.microbatch));
  mix(std::hash<int>()(a.peer));
  mix(static_cast<std::size_t>(a.kind) * 256 + static_cast<std::size_t>(a.op));
  return h;
}

Action compute_action(int stage, Op op, int microbatch) {
  return Action{Kind::kCompute, stage, op, microbatch, -1};
}

Action send_action(const Action& producer, int to_stage) {
  return Action{Kind::kSend, producer.stage, producer.op, producer.microbatch, to_stage};
}

Action recv_action(const Action& consumer, int from_stage) {
  return Action{Kind::kRecv, consumer.stage, consumer.op, consumer.microbatch, from_stage};
}

std::string to_string(Op op) { return std::string(1, static_cast<char>(op)); }

std::string to_string(const Action& a) {
  std::string text = fmt::format("{}{}{}", a.stage, static_cast<char>(a.op), a.microbatch);
  if (a.kind == Kind::kSend) text += fmt::format(">{}", a.peer);
  if (a.kind == Kind::kRecv) text += fmt::format("<{}", a.peer);
  return text;
}

namespace {

// Reads a non-negative decimal number of at most 9 digits at text[*pos]; false if none.
bool read_number(std::string_view text, std::size_t* pos, int* value) {
  std::size_t begin = *pos;
  int v = 0;
  while (*pos < text.size() && std::isdigit(static_cast<unsigned char>(text[*pos])) &&
         *pos - begin < 9) {
    v = v * 10 + (text[*pos] - '0');
    ++*pos;
  }
  *value = v;
  return *pos > begin;
}

}  // namespace

Action parse_action(std::string_view text) {
  auto fail = [&text]() {
    return Error(fmt::format(
        "cannot read action '{}': expected <stage><F|B|I|W><micro-batch>, optionally followed "
        "by >stage (send) or <stage (receive), e.g. 1F3, 0W2, 2B0>1, 1F2<0.",
        text));
  };
  Action a;
  std::size_t pos = 0;
  if (!read_number(text, &pos, &a.stage) || pos >= text.size()) throw fail();
  char op = text[pos++];
  if (op != 'F' && op != 'B' && op != 'I' && op != 'W') throw fail();
  a.op = static_cast<Op>(op);
  if (!read_number(text, &pos, &a.microbatch)) throw fail();
  if (pos < text.size()) {
    char arrow = text[pos++];
    if (arrow != '>' && arrow != '<') throw fail();
    a.kind = arrow == '>' ? Kind::kSend : Kind::kRecv;
    if (!read_number(text, &pos, &a.peer)) throw fail();
  }
  if (pos != text.size()) throw fail();
  return a;
}

std::ostream& operator<<(std::ostream& out, const Action& action) {
  return out << to_string(action);
}

}  // namespace tandem::schedule
