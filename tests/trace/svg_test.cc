#include "tandem/trace/svg.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::trace {
namespace {

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

// Tags open and close in order; returns the first problem, or "" when well nested.
std::string check_nesting(const std::string& svg) {
  std::vector<std::string> stack;
  std::regex tag(R"(<(/?)([a-zA-Z?][\w:-]*)[^>]*?(/?)>)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    if (m[2] == "?xml" || m[3] == "/") continue;
    if (m[1] == "/") {
      if (stack.empty() || stack.back() != m[2]) return "unexpected </" + m[2].str() + ">";
      stack.pop_back();
    } else {
      stack.push_back(m[2]);
    }
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

// GPipe on `devices` stages: all forwards, then all backwards; each action `cost` µs,
// with a send after every forward but the last stage's.
Trace gpipe(int devices, int microbatches, double cost) {
  Trace t;
  for (int d = 0; d < devices; ++d) {
    for (int m = 0; m < microbatches; ++m) {
      Span f;
      f.device = d, f.device_name = "cpu:" + std::to_string(d), f.track = "compute";
      f.kind = 'F', f.stage = d, f.microbatch = m,
      f.name = std::to_string(d) + "F" + std::to_string(m);
      f.start_us = (d + m) * cost, f.dur_us = cost;
      Span b = f;
      b.kind = 'B', b.name = std::to_string(d) + "B" + std::to_string(m);
      b.start_us = (microbatches + devices - 1) * cost + (devices - 1 - d + m) * cost;
      t.spans.push_back(f);
      t.spans.push_back(b);
      if (d + 1 < devices) {
        Span s = f;
        s.track = "comm", s.kind = 'S', s.name += ">" + std::to_string(d + 1);
        s.start_us += cost, s.dur_us = cost / 10;
        t.spans.push_back(s);
      }
    }
  }
  return t;
}

TEST(Svg, OneRectPerSpanAndWellNested) {
  Trace t = gpipe(4, 8, 1000);
  const std::string svg = render_svg(t);
  EXPECT_EQ(count(svg, "<rect class=\"span\""), static_cast<int>(t.spans.size()));
  EXPECT_EQ(count(svg, "<rect class=\"idle\""), 4);
  EXPECT_EQ(count(svg, "<svg "), 1);
  EXPECT_EQ(check_nesting(svg), "");
  EXPECT_NE(svg.find(">tandem timeline</text>"), std::string::npos);
  for (int d = 0; d < 4; ++d)
    EXPECT_NE(svg.find(">cpu:" + std::to_string(d) + "</text>"), std::string::npos);
}

TEST(Svg, WideBoxesAreLabelledWithTheMicrobatch) {
  Trace t = gpipe(2, 4, 1000);  // 10 ms over ~1070 px: boxes ~100 px wide
  const std::string svg = render_svg(t);
  EXPECT_EQ(count(svg, "class=\"label\""), 2 * 2 * 4);  // every F and B box; comm boxes never
  EXPECT_NE(svg.find(">3</text>"), std::string::npos);
}

TEST(Svg, NarrowBoxesDropTheirLabels) {
  Trace t = gpipe(8, 64, 1000);  // 142 slots across ~1070 px: 7.5 px per box
  const std::string svg = render_svg(t);
  EXPECT_EQ(count(svg, "<rect class=\"span\""), static_cast<int>(t.spans.size()));
  EXPECT_EQ(count(svg, "class=\"label\""), 0);
  EXPECT_EQ(check_nesting(svg), "");
}

TEST(Svg, LabelMustFitInTheVisiblePartOfABox) {
  Trace t;
  Span a;
  a.device_name = "cpu:0", a.track = "compute", a.microbatch = 11, a.start_us = 0, a.dur_us = 100;
  Span b = a;
  b.microbatch = 22, b.start_us = 0.5, b.dur_us = 99.5;  // drawn over all but 0.5% of a
  t.spans = {a, b};
  const std::string svg = render_svg(t);
  EXPECT_EQ(svg.find(">11</text>"), std::string::npos);
  EXPECT_NE(svg.find(">22</text>"), std::string::npos);
}

TEST(Svg, LegendListsKindsPresentPlusIdle) {
  Trace t = gpipe(2, 2, 1000);
  t.spans[0].kind = 'W';
  const std::string svg = render_svg(t);
  EXPECT_EQ(count(svg, "<rect class=\"legend\""), 5);  // forward, backward, weight, send, idle
  EXPECT_NE(svg.find(">backward (weight)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">idle</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">optimizer</text>"), std::string::npos);
}

TEST(Svg, UnknownKindsAreOtherAndLightBoxesGetDarkText) {
  Trace t;
  for (char kind : std::string("FIx")) {
    Span s;
    s.device_name = "cpu:0", s.track = "compute", s.kind = kind;
    s.microbatch = int(t.spans.size()), s.start_us = 10.0 * t.spans.size(), s.dur_us = 10;
    t.spans.push_back(s);
  }
  const std::string svg = render_svg(t);
  EXPECT_NE(svg.find(">other</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect class=\"legend\""), 4);  // forward, backward (input), other, idle
  EXPECT_EQ(count(svg, "fill=\"#ffffff\">0</text>"), 1);  // white on blue
  EXPECT_EQ(count(svg, "fill=\"#222222\">1</text>"), 1);  // dark on orange
  EXPECT_EQ(count(svg, "fill=\"#222222\">2</text>"), 1);  // dark on light grey
}

TEST(Svg, KindColoursAreDistinct) {
  std::set<std::string> colours;
  for (char k : std::string("FBIWSRO?")) colours.insert(kind_color(k));
  EXPECT_EQ(colours.size(), 8u);
}

TEST(Svg, AxisHasTicksAndUnit) {
  Trace t = gpipe(1, 5, 1000);  // 0 .. 10 ms
  const std::string svg = render_svg(t);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<line class=\"tick\""), 6);  // 0, 2, 4, 6, 8, 10
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);
}

TEST(Svg, BusyFractionShowsIdleTime) {
  Trace t;
  Span a;
  a.device_name = "cpu:0", a.track = "compute", a.start_us = 0, a.dur_us = 30;
  Span b = a;
  b.start_us = 20, b.dur_us = 30;  // overlaps a: busy is the union [0, 50]
  Span c = a;
  c.device = 1, c.device_name = "cpu:1", c.start_us = 75, c.dur_us = 25;
  t.spans = {a, b, c};
  const std::string svg = render_svg(t);
  EXPECT_NE(svg.find(">busy 50%</text>"), std::string::npos);
  EXPECT_NE(svg.find(">busy 25%</text>"), std::string::npos);
}

TEST(Svg, EscapesText) {
  Trace t = gpipe(1, 1, 10);
  t.spans[0].device_name = t.spans[1].device_name = "a<b&c";
  SvgOptions options;
  options.title = "\"x\" & y";
  const std::string svg = render_svg(t, options);
  EXPECT_NE(svg.find(">a&lt;b&amp;c</text>"), std::string::npos);
  EXPECT_NE(svg.find(">&quot;x&quot; &amp; y</text>"), std::string::npos);
  EXPECT_EQ(check_nesting(svg), "");
}

TEST(Svg, WindowClipsAndBadOptionsThrow) {
  Trace t = gpipe(1, 4, 1000);  // F 0..4 ms, B 4..8 ms
  SvgOptions window;
  window.begin_us = 0, window.end_us = 3500;
  EXPECT_EQ(count(render_svg(t, window), "<rect class=\"span\""), 4);  // 4 forwards, no backward
  SvgOptions narrow;
  narrow.width_px = 100;
  EXPECT_THROW(render_svg(t, narrow), Error);
  SvgOptions reversed;
  reversed.begin_us = 10, reversed.end_us = 5;
  EXPECT_THROW(render_svg(t, reversed), Error);
}

TEST(Svg, EmptyTraceStillRenders) {
  const std::string svg = render_svg(Trace{});
  EXPECT_EQ(count(svg, "<rect class=\"span\""), 0);
  EXPECT_EQ(check_nesting(svg), "");
}

}  // namespace
}  // namespace tandem::trace
