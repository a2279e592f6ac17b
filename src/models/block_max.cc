#include "tandem/models/block_max.h"

#include <vector>

#include "tandem/common/check.h"

namespace tandem::models {
namespace {

// [B, C, S0, S1, ...] (sides whole blocks) as the view [B, C, S0/k0, k0, S1/k1, k1, ...].
torch::Tensor as_blocks(const torch::Tensor& x, at::IntArrayRef kernel) {
  std::vector<int64_t> shape{x.size(0), x.size(1)};
  for (size_t i = 0; i < kernel.size(); ++i) {
    shape.push_back(x.size(static_cast<int64_t>(i) + 2) / kernel[i]);
    shape.push_back(kernel[i]);
  }
  return x.view(shape);
}

// The view of the blocks' element at `offset` [o0, o1, ...] in each block: [B, C, S0/k0, ...].
torch::Tensor element(const torch::Tensor& blocks, const std::vector<int64_t>& offset) {
  torch::Tensor e = blocks;
  // Each select removes one axis: the i-th offset axis sits at 3 + i once the ones before it
  // are gone.
  for (size_t i = 0; i < offset.size(); ++i) e = e.select(static_cast<int64_t>(3 + i), offset[i]);
  return e;
}

// Every offset inside a block, the last axis fastest: max_pool's scan order.
std::vector<std::vector<int64_t>> offsets(at::IntArrayRef kernel) {
  std::vector<std::vector<int64_t>> all{{}};
  for (int64_t k : kernel) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& o : all)
      for (int64_t j = 0; j < k; ++j) {
        next.push_back(o);
        next.back().push_back(j);
      }
    all = std::move(next);
  }
  return all;
}

std::vector<int64_t> maximum_axes(size_t dims) {
  std::vector<int64_t> axes;
  for (size_t i = 0; i < dims; ++i) axes.push_back(static_cast<int64_t>(3 + 2 * i));
  return axes;
}

class BlockMax : public torch::autograd::Function<BlockMax> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               std::vector<int64_t> kernel) {
    // x itself, not a copy: the layers before and after keep it for their own backward.
    ctx->save_for_backward({x});
    ctx->saved_data["kernel"] = kernel;
    return as_blocks(x, kernel).amax(maximum_axes(kernel.size()));
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const std::vector<int64_t> kernel = ctx->saved_data["kernel"].toIntVector();
    const torch::Tensor blocks = as_blocks(x, kernel);
    const torch::Tensor y = blocks.amax(maximum_axes(kernel.size()));
    const torch::Tensor& g = grads[0];
    torch::Tensor gx = torch::zeros(x.sizes(), g.options());
    const torch::Tensor g_blocks = as_blocks(gx, kernel);
    // Each block's gradient goes to its first element equal to the maximum (NaN: to its first
    // NaN, which the maximum then is).
    torch::Tensor taken = torch::zeros(y.sizes(), y.options().dtype(torch::kBool));
    for (const std::vector<int64_t>& o : offsets(kernel)) {
      const torch::Tensor e = element(blocks, o);
      const torch::Tensor hit = e.eq(y).logical_or_(e.isnan()).logical_and_(taken.logical_not());
      element(g_blocks, o).copy_(torch::where(hit, g, torch::zeros({}, g.options())));
      taken.logical_or_(hit);
    }
    return {gx, torch::Tensor()};
  }
};

}  // namespace

bool block_max_pool_here(const torch::Tensor& x, at::IntArrayRef kernel) {
  const auto type = x.scalar_type();
  return x.is_cpu() && (type == torch::kBFloat16 || type == torch::kHalf) && x.dim() == 5 &&
         kernel.size() == 3;
}

torch::Tensor block_max_pool(const torch::Tensor& x, at::IntArrayRef kernel) {
  TANDEM_CHECK(x.dim() >= 3 && x.dim() <= 5 && static_cast<int64_t>(kernel.size()) == x.dim() - 2,
               "block max pooling of x [{}] by a kernel [{}]", fmt::join(x.sizes(), ","),
               fmt::join(kernel, ","));
  torch::Tensor whole = x;
  for (size_t i = 0; i < kernel.size(); ++i) {
    const int64_t axis = static_cast<int64_t>(i) + 2;
    TANDEM_CHECK(kernel[i] >= 1 && kernel[i] <= x.size(axis),
                 "a pooling kernel of {} on a side of {}", kernel[i], x.size(axis));
    whole = whole.narrow(axis, 0, x.size(axis) / kernel[i] * kernel[i]);
  }
  return BlockMax::apply(whole, kernel.vec());
}

}  // namespace tandem::models
