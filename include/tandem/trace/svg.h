// An SVG timeline of a Trace: a picture of a pipeline step that opens anywhere (no browser
// script, no fonts to install).
//
//   title
//   legend: ■ forward ■ backward ... □ idle
//   cpu:0     |[0][1][2][3]      [0][1][2][3]|   one row per device: compute band (every
//   busy 62%  |  ▬  ▬  ▬  ▬        ▬  ▬  ▬   |   track but "comm"), comm band drawn thin below
//   cpu:1     |   [0][1][2][3][0][1][2][3]   |
//             +----+----+----+----+----+----+
//             0    2    4    6    8   10   ms
//
// The row background is idle time; boxes are coloured by Span::kind and carry the
// micro-batch number where it fits (dropped on narrow boxes, so 64 micro-batches on 8
// devices stay readable). Each box has a <title> tooltip with its full description.
// Elements carry classes so tools and tests can find them: rect.span (one per span drawn),
// rect.idle (one per device), rect.legend, text.label (box labels), line.tick.
#pragma once

#include <optional>
#include <string>

#include "tandem/trace/event.h"

namespace tandem::trace {

struct SvgOptions {
  std::string title = "tandem timeline";
  int width_px = 1200;       // whole picture
  int label_width_px = 110;  // the device-name column
  int row_height_px = 26;    // compute band
  int comm_height_px = 6;    // comm band under it
  int font_px = 11;
  // Time window; unset: from the earliest start to the latest end in the trace.
  // Spans outside the window are not drawn; spans crossing its edges are clipped.
  std::optional<double> begin_us, end_us;
};

// Fill colour of a box of this Span::kind (F blue, B green, I orange, W purple, S/R browns, X red,
// O grey; anything else light grey).
const char* kind_color(char kind);

// Legend text for a Span::kind: 'F' -> "forward", 'I' -> "backward (input)", ...
const char* kind_label(char kind);

// The whole SVG document. Throws tandem::Error for options that leave no room to draw
// (width not larger than the label column, non-positive heights, end not after begin).
std::string render_svg(const Trace& trace, const SvgOptions& options = {});

}  // namespace tandem::trace
