// The model a Config names: one of tandem's own (mlp, conv3d-stack, unet3d) sized for the data's
// samples, or an ONNX file.
#include "onnx_model.h"
#include "tandem/common/check.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/models/mlp.h"
#include "tandem/models/unet3d.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

graph::Model make_model(const Config& c, const std::vector<int64_t>& input_shape) {
  TANDEM_ASSERT(!input_shape.empty(), "a source gives the shape of its samples");
  if (onnx_file(c)) return onnx_model(c);
  TANDEM_CHECK(c.loss.empty() && c.output.empty(),
               "--loss and --output choose the loss of a model from an ONNX file; the built-in "
               "model {} has its own{}",
               c.model, c.model == "unet3d" ? " (add --bce for Dice plus cross-entropy)" : "");
  if (c.model == "mlp") {
    models::MlpOptions o;
    o.inputs = 1;
    for (int64_t d : input_shape) o.inputs *= d;
    o.width = c.width;
    o.blocks = c.blocks;
    o.dropout = c.dropout;
    o.classes = c.classes;
    return models::mlp(o);
  }
  TANDEM_CHECK(c.model == "conv3d-stack" || c.model == "unet3d",
               "unknown model '{}'; use mlp, conv3d-stack, unet3d or a path to an .onnx file",
               c.model);
  // [C,D,H,W]; the side for the FLOPs when the volume is a cube, else unknown (0).
  TANDEM_ASSERT(input_shape.size() == 4, "volume sources give [C,D,H,W]");
  const int64_t channels = input_shape[0];
  const bool cube = input_shape[1] == input_shape[2] && input_shape[2] == input_shape[3];
  const int64_t side = cube ? input_shape[1] : 0;
  if (c.model == "conv3d-stack") {
    models::Conv3dStackOptions o;
    o.convs = c.convs;
    if (c.filters > 0) o.filters = c.filters;
    o.in_channels = channels;
    o.volume = side;
    return models::conv3d_stack(o);
  }
  if (c.model == "unet3d") {
    models::Unet3dOptions o;
    o.levels = c.levels;
    if (c.filters > 0) o.filters = c.filters;
    o.in_channels = channels;
    o.dropout = c.dropout;
    o.bce = c.bce;
    o.volume = side;
    return models::unet3d(o);
  }
  TANDEM_ASSERT(false, "model '{}' was checked above", c.model);
}

}  // namespace tandem::train
