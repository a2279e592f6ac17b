// The palette of svg.h: one colour and one legend word per Span::kind.
#include "tandem/trace/svg.h"

namespace tandem::trace {

const char* kind_color(char kind) {
  switch (kind) {
    case 'F':
      return "#4c78a8";  // blue
    case 'B':
      return "#54a24b";  // green
    case 'I':
      return "#f58518";  // orange
    case 'W':
      return "#b279a2";  // purple
    case 'S':
      return "#9d755d";  // brown
    case 'R':
      return "#d8b5a5";  // light brown
    case 'X':
      return "#e45756";  // red
    case 'G':
      return "#eeca3b";  // yellow
    case 'O':
      return "#7f7f7f";  // grey
    default:
      return "#c7c7c7";  // light grey
  }
}

const char* kind_label(char kind) {
  switch (kind) {
    case 'F':
      return "forward";
    case 'B':
      return "backward";
    case 'I':
      return "backward (input)";
    case 'W':
      return "backward (weight)";
    case 'S':
      return "send";
    case 'R':
      return "receive";
    case 'X':
      return "slab exchange";
    case 'G':
      return "gradient sums";
    case 'O':
      return "optimizer";
    default:
      return "other";
  }
}

}  // namespace tandem::trace
