// Pad (opsets 11 on: pads as a constant input [begin..., end...], optional constant value),
// modes constant, reflect and edge. The batch axis is never padded.
#include "ops.h"

namespace tandem::onnx::detail {

Op make_pad(const Node& n) {
  const std::string mode = n.get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    n.refuse(fmt::format("mode '{}' is unknown; ONNX pads with constant, reflect or edge", mode));
  if (n.has_input(3)) n.refuse("its axes input (opset 18) is not supported");
  const std::vector<int64_t> pads = n.constant_ints(1, "pads");
  if (pads.size() % 2 != 0) n.refuse(fmt::format("pads [{}] must hold a begin and an end per axis", fmt::join(pads, ",")));
  const size_t rank = pads.size() / 2;
  if (n.batched(0) && rank > 0 && (pads[0] != 0 || pads[rank] != 0))
    n.refuse(fmt::format("pads [{}] pad the batch axis", fmt::join(pads, ",")));
  double value = 0;
  if (n.has_input(2)) value = n.constant(2, "constant value").item<double>();
  // LibTorch's reflect and replicate pads take [B,C] and 1 to 3 padded spatial axes.
  if (mode != "constant") {
    if (rank < 3 || rank > 5 || pads[1] != 0 || pads[rank + 1] != 0)
      n.refuse(fmt::format("{} padding is supported on [B,C] and 1 to 3 spatial axes, not with "
                           "pads [{}]",
                           mode, fmt::join(pads, ",")));
  }
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    TANDEM_CHECK(static_cast<size_t>(x.dim()) == rank,
                 "ONNX node '{}' (Pad) has pads for {} axes but its input has {}", name, rank,
                 x.dim());
    std::vector<int64_t> pairs;  // LibTorch: (begin, end) from the last axis backwards
    const size_t first = mode == "constant" ? 0 : 2;  // reflect and edge leave [B,C] alone
    for (size_t i = rank; i-- > first;) {
      pairs.push_back(pads[i]);
      pairs.push_back(pads[rank + i]);
    }
    if (mode == "constant") return graph::Tensors{torch::constant_pad_nd(x, pairs, value)};
    switch (rank) {
      case 3:
        return graph::Tensors{mode == "reflect" ? torch::reflection_pad1d(x, pairs)
                                                : torch::replication_pad1d(x, pairs)};
      case 4:
        return graph::Tensors{mode == "reflect" ? torch::reflection_pad2d(x, pairs)
                                                : torch::replication_pad2d(x, pairs)};
      default:
        return graph::Tensors{mode == "reflect" ? torch::reflection_pad3d(x, pairs)
                                                : torch::replication_pad3d(x, pairs)};
    }
  };
  return op;
}

}  // namespace tandem::onnx::detail
