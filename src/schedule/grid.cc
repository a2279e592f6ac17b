// Printing and parsing schedules as grids, and small whole-schedule queries.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <ostream>

#include "tandem/common/check.h"
#include "tandem/schedule/schedule.h"

namespace tandem::schedule {

bool Schedule::operator==(const Schedule& other) const {
  return name == other.name && num_stages == other.num_stages &&
         num_microbatches == other.num_microbatches && num_devices == other.num_devices &&
         stage_device == other.stage_device && device_actions == other.device_actions;
}

std::string format_grid(const Schedule& schedule, const Action* mark) {
  std::string name = schedule.name;
  for (char& c : name) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '|') c = '_';
  }
  std::string out = fmt::format("name={} stages={} microbatches={} devices={} stage_device={}\n",
                                name, schedule.num_stages, schedule.num_microbatches,
                                schedule.num_devices, fmt::join(schedule.stage_device, ","));
  // A pointer into the schedule marks that one slot; any other pointer marks by value.
  // (std::less gives a total order on pointers into unrelated arrays.)
  bool mark_in_schedule = false;
  std::less<const Action*> before;
  for (const auto& row : schedule.device_actions) {
    mark_in_schedule |= mark != nullptr && !row.empty() && !before(mark, row.data()) &&
                        before(mark, row.data() + row.size());
  }
  for (std::size_t d = 0; d < schedule.device_actions.size(); ++d) {
    std::string row = fmt::format("d{} |", d);
    std::vector<std::size_t> carets;
    for (const Action& a : schedule.device_actions[d]) {
      bool marked = mark != nullptr && (mark_in_schedule ? mark == &a : *mark == a);
      row += ' ';
      if (marked) {
        carets.push_back(row.size());
        row += '[' + to_string(a) + ']';
      } else {
        row += to_string(a);
      }
    }
    out += row + '\n';
    if (!carets.empty()) {
      std::string caret_line(carets.back() + 1, ' ');
      for (std::size_t c : carets) caret_line[c] = '^';
      out += caret_line + '\n';
    }
  }
  return out;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t begin = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > begin) words.push_back(s.substr(begin, i - begin));
  }
  return words;
}

// A non-negative integer filling all of `text`, or -1.
int to_int(std::string_view text) {
  if (text.empty() || text.size() > 9) return -1;
  int v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

struct Header {
  bool present = false;
  Schedule fields;  // everything but device_actions
};

Header parse_header(std::string_view line, int line_number) {
  Header header;
  header.present = true;
  bool seen[5] = {false, false, false, false, false};
  const char* keys[5] = {"name", "stages", "microbatches", "devices", "stage_device"};
  for (std::string_view word : split_words(line)) {
    std::size_t eq = word.find('=');
    TANDEM_CHECK(eq != std::string_view::npos,
                 "grid line {}: '{}' is not key=value; the header reads "
                 "'name=N stages=S microbatches=M devices=D stage_device=d0,d1,...'.",
                 line_number, word);
    std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    int k = static_cast<int>(std::find(keys, keys + 5, key) - keys);
    TANDEM_CHECK(k < 5, "grid line {}: unknown header key '{}' (known: {}).", line_number, key,
                 fmt::join(keys, keys + 5, ", "));
    seen[k] = true;
    if (k == 0) {
      header.fields.name = std::string(value);
      continue;
    }
    if (k == 4) {
      std::size_t begin = 0;
      while (!value.empty() && begin <= value.size()) {
        std::size_t comma = std::min(value.find(',', begin), value.size());
        int device = to_int(value.substr(begin, comma - begin));
        TANDEM_CHECK(device >= 0,
                     "grid line {}: stage_device '{}' must be comma-separated devices.",
                     line_number, value);
        header.fields.stage_device.push_back(device);
        begin = comma + 1;
      }
      continue;
    }
    int v = to_int(value);
    TANDEM_CHECK(v >= 0, "grid line {}: {} '{}' is not a non-negative integer.", line_number, key,
                 value);
    (k == 1   ? header.fields.num_stages
     : k == 2 ? header.fields.num_microbatches
              : header.fields.num_devices) = v;
  }
  for (int k = 0; k < 5; ++k) {
    TANDEM_CHECK(seen[k], "grid line {}: the header lacks {}=.", line_number, keys[k]);
  }
  TANDEM_CHECK(static_cast<int>(header.fields.stage_device.size()) == header.fields.num_stages,
               "grid line {}: stage_device lists {} devices but stages={}.", line_number,
               header.fields.stage_device.size(), header.fields.num_stages);
  return header;
}

// Fills the fields a header would have given from the rows themselves.
void infer_header(Schedule* s) {
  s->name = "custom";
  s->num_devices = static_cast<int>(s->device_actions.size());
  s->num_stages = 0;
  s->num_microbatches = 0;
  for (const auto& row : s->device_actions) {
    for (const Action& a : row) {
      s->num_stages = std::max({s->num_stages, a.stage + 1, a.peer + 1});
      s->num_microbatches = std::max(s->num_microbatches, a.microbatch + 1);
    }
  }
  s->stage_device.assign(s->num_stages, -1);
  for (int d = 0; d < s->num_devices; ++d) {
    for (const Action& a : s->device_actions[d]) {
      if (s->stage_device[a.stage] < 0) s->stage_device[a.stage] = d;
    }
  }
  for (int stage = 0; stage < s->num_stages; ++stage) {
    TANDEM_CHECK(s->stage_device[stage] >= 0,
                 "the grid never runs stage {}, so its device is unknown; add a header line "
                 "'name=N stages=S microbatches=M devices=D stage_device=...'.",
                 stage);
  }
}

}  // namespace

Schedule parse_grid(std::string_view text) {
  Header header;
  Schedule schedule;
  int line_number = 0;
  while (!text.empty()) {
    std::size_t newline = std::min(text.find('\n'), text.size());
    std::string_view line = trim(text.substr(0, newline));
    text.remove_prefix(std::min(newline + 1, text.size()));
    ++line_number;
    if (line.empty() || line.front() == '#' ||
        line.find_first_not_of("^ ") == std::string_view::npos) {
      continue;
    }
    std::size_t bar = line.find('|');
    if (bar == std::string_view::npos) {
      TANDEM_CHECK(!header.present && schedule.device_actions.empty(),
                   "grid line {} ('{}'): expected a row 'd{} | actions...'.", line_number, line,
                   schedule.device_actions.size());
      header = parse_header(line, line_number);
      continue;
    }
    std::string_view label = trim(line.substr(0, bar));
    std::size_t device = schedule.device_actions.size();
    TANDEM_CHECK(
        label == fmt::format("d{}", device),
        "grid line {} ('{}'): expected row 'd{}', found '{}'; rows go d0, d1, ... in order.",
        line_number, line, device, label);
    std::vector<Action> row;
    for (std::string_view word : split_words(line.substr(bar + 1))) {
      if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
        word = word.substr(1, word.size() - 2);
      }
      try {
        row.push_back(parse_action(word));
      } catch (const Error& e) {
        throw Error(fmt::format("grid line {} ('{}'): {}", line_number, line, e.what()));
      }
    }
    schedule.device_actions.push_back(std::move(row));
  }
  if (!header.present) {
    TANDEM_CHECK(!schedule.device_actions.empty(), "the grid has no rows ('d0 | 0F0 ...').");
    infer_header(&schedule);
    return schedule;
  }
  TANDEM_CHECK(static_cast<int>(schedule.device_actions.size()) == header.fields.num_devices,
               "the grid header says devices={} but there are {} rows.", header.fields.num_devices,
               schedule.device_actions.size());
  header.fields.device_actions = std::move(schedule.device_actions);
  return header.fields;
}

bool splits_backward(const Schedule& schedule) {
  for (const auto& row : schedule.device_actions) {
    for (const Action& a : row) {
      if (a.kind == Kind::kCompute && (a.op == Op::kInput || a.op == Op::kWeight)) return true;
    }
  }
  return false;
}

bool is_lowered(const Schedule& schedule) {
  for (const auto& row : schedule.device_actions) {
    for (const Action& a : row) {
      if (a.kind != Kind::kCompute) return true;
    }
  }
  return false;
}

Schedule compute_only(const Schedule& schedule) {
  Schedule result = schedule;
  for (auto& row : result.device_actions) {
    row.erase(std::remove_if(row.begin(), row.end(),
                             [](const Action& a) { return a.kind != Kind::kCompute; }),
              row.end());
  }
  return result;
}

std::vector<int> peak_in_flight(const Schedule& schedule) {
  std::vector<int> current(schedule.num_stages, 0), peak(schedule.num_stages, 0);
  bool has_backward = false;
  for (const auto& row : schedule.device_actions) {
    for (const Action& a : row) {
      has_backward |= a.kind == Kind::kCompute && a.op != Op::kForward;
    }
  }
  if (!has_backward) return peak;
  for (const auto& row : schedule.device_actions) {
    for (const Action& a : row) {
      if (a.kind != Kind::kCompute || a.stage < 0 || a.stage >= schedule.num_stages) continue;
      if (a.op == Op::kForward) {
        peak[a.stage] = std::max(peak[a.stage], ++current[a.stage]);
      } else if (a.op == Op::kBackward || a.op == Op::kWeight) {
        --current[a.stage];
      }
    }
  }
  return peak;
}

std::ostream& operator<<(std::ostream& out, const Schedule& schedule) {
  return out << format_grid(schedule);
}

}  // namespace tandem::schedule
