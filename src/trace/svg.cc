// render_svg from svg.h. Geometry: x grows with time inside [plot_x0, plot_x1]; rows stack
// down from rows_top, each `pitch` pixels: compute band, 2 px gap, comm band, spacing.
#include "tandem/trace/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "tandem/common/check.h"
#include "trace/time_axis.h"

namespace tandem::trace {
namespace {

constexpr const char* kKindOrder = "FBIWSRXGO";  // legend order; other kinds come last
constexpr const char* kIdleColor = "#efefef";

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Glyph width estimate for the default sans-serif fonts; used only to decide whether a label fits.
double text_width(std::string_view text, int font_px) { return 0.58 * font_px * text.size(); }

// The kind's own letter if the palette has one, else '?' (drawn and listed as "other").
char palette_kind(char kind) {
  return kind != '\0' && std::strchr(kKindOrder, kind) != nullptr ? kind : '?';
}

// White text on these fills, dark text on the light ones (I orange, R light brown, other).
bool dark_fill(char kind) {
  const char k = palette_kind(kind);
  return k != '?' && std::strchr("FBWSO", k) != nullptr;
}

// Messages, and a spatial split's slab exchanges (which happen inside compute actions).
bool in_comm_band(const Span& span) { return span.track == "comm" || span.track == "slabs"; }

struct Geometry {
  double begin_us, end_us, x0, x1;
  int rows_top, row_h, comm_h, pitch;
  double x(double us) const { return x0 + (us - begin_us) / (end_us - begin_us) * (x1 - x0); }
  int row_y(int row) const { return rows_top + row * pitch; }
};

// Fraction of [begin, end] covered by at least one compute-band span of `device`.
double busy_fraction(const std::vector<const Span*>& spans, double begin, double end) {
  std::vector<std::pair<double, double>> parts;
  for (const Span* s : spans) {
    double a = std::max(s->start_us, begin), b = std::min(s->start_us + s->dur_us, end);
    if (b > a) parts.emplace_back(a, b);
  }
  std::sort(parts.begin(), parts.end());
  double covered = 0, reach = begin;
  for (auto [a, b] : parts) {
    a = std::max(a, reach);
    if (b > a) covered += b - a;
    reach = std::max(reach, b);
  }
  return covered / (end - begin);
}

std::string tooltip(const Span& s, const TimeUnit& unit) {
  std::string text = s.name;
  if (s.stage >= 0) text += fmt::format(" · stage {}", s.stage);
  if (s.microbatch >= 0) text += fmt::format(" · micro-batch {}", s.microbatch);
  if (!s.layers.empty()) text += " · " + s.layers;
  text += fmt::format(" · {:.4g}–{:.4g} {} ({:.4g} {})", s.start_us / unit.us,
                      (s.start_us + s.dur_us) / unit.us, unit.name, s.dur_us / unit.us, unit.name);
  return escape(text);
}

// `label_until_us`: where the next box of the band starts (a label must fit in the part of
// the box that stays visible); unset: the box is not labelled.
void draw_span(std::string& out, const Span& s, const Geometry& g, const TimeUnit& unit, int y,
               int h, int font_px, std::optional<double> label_until_us) {
  const double a = g.x(std::max(s.start_us, g.begin_us));
  const double b = g.x(std::min(s.start_us + s.dur_us, g.end_us));
  const double w = std::max(b - a, 0.5);  // a zero-length span still shows as a hairline
  const char* stroke = w >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.5\"" : "";
  out += fmt::format(
      R"(<rect class="span" x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="{}"{}><title>{}</title></rect>)",
      a, y, w, h, kind_color(s.kind), stroke, tooltip(s, unit));
  out += '\n';
  if (!label_until_us) return;
  const double visible = g.x(std::min({s.start_us + s.dur_us, *label_until_us, g.end_us})) - a;
  const std::string label = s.microbatch >= 0 ? std::to_string(s.microbatch) : s.name;
  if (label.empty() || text_width(label, font_px) + 4 > visible) return;
  out += fmt::format(
      R"(<text class="label" x="{:.2f}" y="{:.1f}" text-anchor="middle" fill="{}">{}</text>)",
      a + visible / 2, y + h / 2.0 + font_px * 0.36, dark_fill(s.kind) ? "#ffffff" : "#222222",
      escape(label));
  out += '\n';
}

std::string legend(const Trace& trace, int y, int x, int font_px) {
  std::string kinds;  // those present, in palette order
  for (char k : std::string(kKindOrder) + '?') {
    auto has = [k](const Span& s) { return palette_kind(s.kind) == k; };
    if (std::any_of(trace.spans.begin(), trace.spans.end(), has)) kinds += k;
  }
  std::vector<std::pair<std::string, const char*>> entries;
  for (char k : kinds) entries.emplace_back(kind_label(k), kind_color(k));
  entries.emplace_back("idle", kIdleColor);
  std::string out;
  for (const auto& [text, color] : entries) {
    out += fmt::format(
        R"(<rect class="legend" x="{}" y="{}" width="10" height="10" fill="{}" stroke="#999999" stroke-width="0.5"/>)",
        x, y - 9, color);
    out += fmt::format(R"(<text x="{}" y="{}">{}</text>)", x + 14, y, escape(text)) + "\n";
    x += 14 + static_cast<int>(text_width(text, font_px)) + 16;
  }
  return out;
}

}  // namespace

std::string render_svg(const Trace& trace, const SvgOptions& o) {
  TANDEM_CHECK(
      o.width_px > o.label_width_px + 40 && o.row_height_px > 0 && o.comm_height_px >= 0 &&
          o.font_px > 0,
      "SVG options leave no room to draw: width_px {} must exceed label_width_px {} by more "
      "than 40, row_height_px {} and font_px {} must be positive, comm_height_px {} not negative.",
      o.width_px, o.label_width_px, o.row_height_px, o.font_px, o.comm_height_px);
  double begin = 0, end = 0;
  if (!trace.spans.empty()) {
    begin = trace.spans[0].start_us, end = begin;
    for (const Span& s : trace.spans)
      begin = std::min(begin, s.start_us), end = std::max(end, s.start_us + s.dur_us);
  }
  begin = o.begin_us.value_or(begin);
  end = o.end_us.value_or(end);
  TANDEM_CHECK(!(o.begin_us || o.end_us) || end > begin,
               "SVG time window [{}, {}] µs is empty; end_us must be after begin_us.", begin, end);
  if (!(end > begin)) end = begin + 1;  // an empty trace or one instant: any scale will do

  const auto devices = device_names(trace);
  std::map<int, std::vector<const Span*>> compute, comm;
  for (const Span& s : trace.spans) {
    if (s.start_us > end || s.start_us + s.dur_us < begin) continue;
    (in_comm_band(s) ? comm : compute)[s.device].push_back(&s);
  }
  const int pitch = o.row_height_px + 2 + o.comm_height_px + 10;
  const Geometry g{begin,
                   end,
                   double(o.label_width_px),
                   double(o.width_px - 20),
                   56,
                   o.row_height_px,
                   o.comm_height_px,
                   pitch};
  const int axis_y = g.row_y(static_cast<int>(devices.size())) + 2;
  const int height = axis_y + 36;
  const TimeUnit unit = pick_unit(end - begin);

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" font-family="sans-serif" font-size="{2}">)"
      "\n"
      R"(<rect class="background" width="100%" height="100%" fill="#ffffff"/>)"
      "\n"
      R"(<text class="title" x="{3}" y="{4}" font-size="{5}" font-weight="bold">{6}</text>)"
      "\n",
      o.width_px, height, o.font_px, 8, o.font_px + 9, o.font_px + 4, escape(o.title));
  out += legend(trace, 40, o.label_width_px, o.font_px);

  int row = 0;
  for (const auto& [device, name] : devices) {
    const int y = g.row_y(row++);
    out += fmt::format(R"(<text class="device" x="8" y="{}" font-weight="bold">{}</text>)",
                       y + o.row_height_px / 2 - 1, escape(name)) +
           "\n";
    out += fmt::format(R"(<text class="busy" x="8" y="{}" fill="#666666">busy {:.0f}%</text>)",
                       y + o.row_height_px / 2 + o.font_px,
                       100 * busy_fraction(compute[device], begin, end)) +
           "\n";
    out += fmt::format(
               R"(<rect class="idle" x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="{}"/>)",
               g.x0, y, g.x1 - g.x0, o.row_height_px, kIdleColor) +
           "\n";
    std::vector<const Span*>& boxes = compute[device];
    std::stable_sort(boxes.begin(), boxes.end(),
                     [](const Span* a, const Span* b) { return a->start_us < b->start_us; });
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      const double next =
          i + 1 < boxes.size() ? std::max(boxes[i + 1]->start_us, boxes[i]->start_us) : end;
      draw_span(out, *boxes[i], g, unit, y, o.row_height_px, o.font_px, next);
    }
    for (const Span* s : comm[device])
      draw_span(out, *s, g, unit, y + o.row_height_px + 2, o.comm_height_px, o.font_px,
                std::nullopt);
  }

  out += fmt::format(
             R"(<line class="axis" x1="{:.2f}" y1="{}" x2="{:.2f}" y2="{}" stroke="#333333"/>)",
             g.x0, axis_y, g.x1, axis_y) +
         "\n";
  for (double t : nice_ticks(begin, end)) {
    const double x = g.x(t);
    out +=
        fmt::format(
            R"(<line class="grid" x1="{0:.2f}" y1="{1}" x2="{0:.2f}" y2="{2}" stroke="#000000" stroke-opacity="0.08"/>)",
            x, g.rows_top, axis_y) +
        "\n";
    out +=
        fmt::format(
            R"(<line class="tick" x1="{0:.2f}" y1="{1}" x2="{0:.2f}" y2="{2}" stroke="#333333"/>)",
            x, axis_y, axis_y + 5) +
        "\n";
    out +=
        fmt::format(R"(<text class="tick-label" x="{:.2f}" y="{}" text-anchor="middle">{}</text>)",
                    x, axis_y + 17, format_tick(t, unit)) +
        "\n";
  }
  out += fmt::format(R"(<text class="unit" x="{:.2f}" y="{}" text-anchor="end">time ({})</text>)",
                     g.x1, axis_y + 31, unit.name) +
         "\n";
  out += "</svg>\n";
  return out;
}

}  // namespace tandem::trace
