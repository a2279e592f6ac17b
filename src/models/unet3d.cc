#include "tandem/models/unet3d.h"

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>

#include "tandem/common/check.h"
#include "tandem/models/block_max.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/models/layers.h"
#include "tandem/models/relu.h"
#include "tandem/models/split_conv.h"
#include "tandem/models/transposed_product.h"
#include "tandem/spatial/forward_chunks.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::models {

namespace {

// Voxels per sample at `level` of an S^3 input (0 when S is unknown).
int64_t voxels_at(int64_t volume, int level) {
  const int64_t s = volume >> level;
  return s * s * s;
}

// MaxPool3D(2): [B,C,D,H,W] -> [B,C,D/2,H/2,W/2]. `levels` only words the error.
graph::Layer pool_layer(int level, int levels) {
  std::string name = fmt::format("pool{}", level);
  return graph::make_function_layer(
      name,
      [name, levels](const graph::Tensors& in) {
        const torch::Tensor& x = in[0];
        TANDEM_CHECK(x.dim() == 5, "layer '{}' needs a [B,C,D,H,W] tensor, not one of shape [{}]",
                     name, fmt::join(x.sizes(), ","));
        for (int d = 2; d < 5; ++d) {
          TANDEM_CHECK(x.size(d) % 2 == 0,
                       "layer '{}' halves a volume of [{}] with an odd side; a 3D U-Net with {} "
                       "levels needs sides divisible by {}: crop or pad the volume, or use fewer "
                       "levels",
                       name, fmt::join(x.sizes().slice(2), ","), levels,
                       int64_t{1} << (levels - 1));
        }
        if (x.scalar_type() == torch::kFloat) return graph::Tensors{torch::max_pool3d(x, 2)};
        // A reduced --precision: LibTorch's CPU max_pool3d has no bf16 kernel, and autocast would
        // run it on an fp32 copy of x kept for the backward (block_max.h).
        return graph::Tensors{block_max_pool(x, {2, 2, 2})};
      },
      {fmt::format("skip{}", level)}, {name});
}

// Conv3DTranspose(2x2x2, stride 2): [B,in,D,H,W] -> [B,out,2D,2H,2W]. `voxels_in` per sample.
graph::Layer up_layer(int level, int64_t in, int64_t out, std::string input, int64_t voxels_in) {
  torch::nn::ConvTranspose3d up(torch::nn::ConvTranspose3dOptions(in, out, 2).stride(2));
  graph::Layer l;
  l.name = fmt::format("up{}", level);
  l.module = up.ptr();
  l.bind = [](const std::shared_ptr<torch::nn::Module>& module) -> graph::ForwardFn {
    torch::nn::ConvTranspose3d up(
        std::dynamic_pointer_cast<torch::nn::ConvTranspose3dImpl>(module));
    return [up](const graph::Tensors& x) mutable {
      const torch::Tensor& in = x[0];
      // Under bf16 on CPU devices, as a matrix product (transposed_product.h).
      const bool product = transposed_conv_as_product_here(in, up->weight, {2, 2, 2});
      auto run = [&](const torch::Tensor& piece) {
        return product ? transposed_conv_as_product(piece, up->weight, up->bias)
                       : up->forward(piece);
      };
      // Forward only, as split_conv3d's: input planes in chunks, each giving its own two output
      // planes per input plane (the kernel does not overlap itself).
      if (!spatial::chunks_forward(
              in.numel() / in.size(1) * 8 * up->weight.size(1) * in.element_size(),
              /*local=*/true))
        return graph::Tensors{run(in)};
      return graph::Tensors{spatial::local_in_chunks(in, 2, run)};
    };
  };
  l.forward = l.bind(l.module);
  l.inputs = {std::move(input)};
  l.outputs = {fmt::format("up{}", level)};
  l.forward_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(out) * 8.0 *
                               static_cast<double>(voxels_in);
  return l;
}

// The decoder's first convolution with the skip concatenation fused in:
// {up [B,F_l,..], skip [B,F_l,..]} -> cat along C [B,2F_l,..] -> Conv3D(3x3x3) + relu [B,F_l,..].
graph::Layer concat_conv_layer(int level, int64_t filters, int64_t voxels) {
  const int64_t in = 2 * filters;
  torch::nn::Conv3d conv(torch::nn::Conv3dOptions(in, filters, 3).padding(1));
  graph::Layer l;
  l.name = fmt::format("dec{}.conv0", level);
  l.module = conv.ptr();
  l.bind = [](const std::shared_ptr<torch::nn::Module>& module) -> graph::ForwardFn {
    torch::nn::Conv3d conv(std::dynamic_pointer_cast<torch::nn::Conv3dImpl>(module));
    return [conv](const graph::Tensors& x) {
      // In place, as conv3d_layer's.
      torch::Tensor y = split_conv3d_concat({x[0], x[1]}, conv->weight, conv->bias, 1);
      return graph::Tensors{relu_in_place_with_gradient_in_place(y)};
    };
  };
  l.forward = l.bind(l.module);
  l.splits_backward = true;
  l.inputs = {fmt::format("up{}", level), fmt::format("skip{}", level)};
  l.outputs = {fmt::format("dec{}.a", level)};
  l.forward_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(filters) * 27.0 *
                               static_cast<double>(voxels);
  return l;
}

// Conv3D(1x1x1, F -> 1) + sigmoid: [B,F,D,H,W] -> [B,1,D,H,W] probabilities.
graph::Layer final_layer(int64_t filters, std::string input, int64_t voxels) {
  graph::Layer l =
      conv3d_layer("final", filters, 1, 1, /*relu=*/false, std::move(input), "output", voxels);
  graph::BindFn conv = l.bind;
  l.bind = [conv](const std::shared_ptr<torch::nn::Module>& module) -> graph::ForwardFn {
    graph::ForwardFn f = conv(module);
    return [f](const graph::Tensors& x) {
      // The probabilities in fp32 whatever the forward's type: in bf16 a sigmoid rounds to
      // exactly 1 from a logit of about 6.2 on (fp32: 17), where the loss's log(1 - p) and its
      // gradient blow up for a voxel whose mask is 0.
      const torch::Tensor logits = f(x)[0];
      return graph::Tensors{torch::sigmoid(logits.to(torch::kFloat))};
    };
  };
  l.forward = l.bind(l.module);
  return l;
}

}  // namespace

graph::Model unet3d(const Unet3dOptions& o) {
  TANDEM_CHECK(o.levels >= 1, "the 3D U-Net needs at least 1 level, not {}", o.levels);
  TANDEM_CHECK(o.levels <= 16, "the 3D U-Net takes at most 16 levels, not {}", o.levels);
  TANDEM_CHECK(o.filters >= 1, "the 3D U-Net needs at least 1 filter, not {}", o.filters);
  TANDEM_CHECK(o.in_channels >= 1, "the 3D U-Net needs at least 1 input channel, not {}",
               o.in_channels);
  TANDEM_CHECK(o.dropout >= 0 && o.dropout < 1, "dropout must be in [0, 1), not {}", o.dropout);
  const int64_t divisor = int64_t{1} << (o.levels - 1);
  TANDEM_CHECK(o.volume >= 0, "the volume side must be positive (or 0: unknown), not {}", o.volume);
  if (o.volume % divisor != 0) {
    int fits = 1;  // the most levels whose pooling divides this side
    while (fits < 16 && o.volume % (int64_t{1} << fits) == 0) ++fits;
    TANDEM_CHECK(false,
                 "a 3D U-Net with {} levels needs a volume side divisible by {}, not {}: use a "
                 "side of {}, or at most {} level{}",
                 o.levels, divisor, o.volume, (o.volume / divisor + 1) * divisor, fits,
                 fits == 1 ? "" : "s");
  }
  const int bottom = o.levels - 1;
  auto filters = [&](int level) { return o.filters << level; };
  auto voxels = [&](int level) { return voxels_at(o.volume, level); };

  graph::Model m;
  m.name = "unet3d";
  std::string prev = m.input;
  int64_t channels = o.in_channels;
  for (int l = 0; l < bottom; ++l) {
    m.layers.push_back(conv3d_layer(fmt::format("enc{}.conv0", l), channels, filters(l), 3, true,
                                    prev, fmt::format("enc{}.a", l), voxels(l)));
    m.layers.push_back(conv3d_layer(fmt::format("enc{}.conv1", l), filters(l), filters(l), 3, true,
                                    fmt::format("enc{}.a", l), fmt::format("skip{}", l),
                                    voxels(l)));
    m.layers.push_back(pool_layer(l, o.levels));
    prev = fmt::format("pool{}", l);
    channels = filters(l);
  }
  m.layers.push_back(conv3d_layer("bottom.conv0", channels, filters(bottom), 3, true, prev,
                                  "bottom.a", voxels(bottom)));
  m.layers.push_back(conv3d_layer("bottom.conv1", filters(bottom), filters(bottom), 3, true,
                                  "bottom.a", "bottom", voxels(bottom)));
  prev = "bottom";
  if (o.dropout > 0) {
    m.layers.push_back(dropout_layer("bottom.dropout", o.dropout, prev, "bottom.dropped"));
    prev = "bottom.dropped";
  }
  for (int l = bottom - 1; l >= 0; --l) {
    m.layers.push_back(up_layer(l, filters(l + 1), filters(l), prev, voxels(l + 1)));
    m.layers.push_back(concat_conv_layer(l, filters(l), voxels(l)));
    m.layers.push_back(conv3d_layer(fmt::format("dec{}.conv1", l), filters(l), filters(l), 3, true,
                                    fmt::format("dec{}.a", l), fmt::format("dec{}", l), voxels(l)));
    prev = fmt::format("dec{}", l);
  }
  m.layers.push_back(final_layer(filters(0), prev, voxels(0)));

  if (o.bce) {
    m.loss = [](const torch::Tensor& output, const torch::Tensor& target) {
      return soft_dice_loss(output, target) + bce_loss(output, target);
    };
  } else {
    m.loss = soft_dice_loss;
  }
  m.metric = hard_dice_sum;
  m.metric_name = "dice";
  m.slab_dim = 2;  // depth of [B,C,D,H,W]
  m.slab_multiple = divisor;
  return m;
}

}  // namespace tandem::models
