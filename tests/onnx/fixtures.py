"""Writes the ONNX test fixtures into a folder (python3 fixtures.py DIR), with Debian's
python3-torch and python3-onnx. Everything is made from fixed seeds, at test time:

  <model>.onnx, <model>_forward.pt, <model>_batches.pt   PyTorch exports (torch_models.py):
                                                          the graph, its outputs in training
                                                          and evaluation mode, training batches
  keras.onnx, keras_forward.pt                            a graph as tf2onnx writes a Keras
                                                          model (examples/onnx/keras_graph.py)
  keras_unet3d.onnx, keras_unet3d_forward.pt              and a channels-last Keras 3D U-Net
                                                          (examples/onnx/keras_unet3d.py)
  ops/<case>.onnx, ops/<case>.pt                          one operator (or two) per graph with
                                                          input and expected output, computed
                                                          here by PyTorch or by loops
  refused/<case>.onnx                                     graphs tandem must refuse

.pt files are plain dicts of at least two tensors (what LibTorch 1.13's reader takes).
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "onnx"))
import keras_graph  # noqa: E402
import keras_unet3d  # noqa: E402
import torch_models  # noqa: E402

OPSET = 13


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def save_model(path, nodes, inputs, outputs, initializers=(), opset=OPSET, check=True):
    graph = helper.make_graph(nodes, os.path.basename(path)[:-5], inputs, outputs,
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7  # what onnx 1.12 checks for opsets up to 15, and reads up to 17
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, path)


def value(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# Single-operator cases: (nodes, input tensor, initializers, expected output, opset)

def op_cases():
    cases = {}

    def case(name, nodes, x, expected, inits=(), opset=OPSET, **extra):
        cases[name] = (nodes, x, list(inits), expected, opset, extra)

    x = rand(2, 4, 7, 9, seed=1)
    w = rand(6, 2, 3, 3, seed=2)
    b = rand(6, seed=3)
    case("conv2d_asymmetric",
         [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[0, 1, 1, 2], strides=[2, 1],
                           dilations=[1, 2], group=2)],
         x, F.conv2d(F.pad(x, (1, 2, 0, 1)), w, b, stride=(2, 1), dilation=(1, 2), groups=2),
         [tensor("w", w), tensor("b", b)])
    x = rand(2, 3, 10, seed=4)
    w = rand(5, 3, 4, seed=5)
    case("conv1d_same_upper",
         [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2])],
         x, F.conv1d(F.pad(x, (1, 1)), w, stride=2), [tensor("w", w)])
    w3 = rand(5, 3, 3, seed=6)
    case("conv1d_same_lower",
         [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2])],
         x, F.conv1d(F.pad(x, (1, 0)), w3, stride=2), [tensor("w", w3)])
    x = rand(1, 2, 5, 6, 7, seed=7)
    w = rand(3, 2, 3, 3, 3, seed=8)
    b = rand(3, seed=9)
    case("conv3d", [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 6)],
         x, F.conv3d(x, w, b, padding=1), [tensor("w", w), tensor("b", b)])
    x = rand(2, 4, 5, 5, seed=10)
    w = rand(4, 3, 3, 3, seed=11)
    b = rand(3, seed=12)
    case("conv_transpose2d",
         [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2],
                           pads=[1, 1, 1, 1], output_padding=[1, 1])],
         x, F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
         [tensor("w", w), tensor("b", b)])
    x = rand(1, 4, 4, 4, seed=13)
    w = rand(4, 2, 3, 3, seed=14)
    b = rand(4, seed=15)
    full = F.conv_transpose2d(x, w, None, stride=2, groups=2)
    case("conv_transpose_asymmetric",
         [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2],
                           pads=[0, 1, 1, 0], group=2)],
         x, full[:, :, 0:-1, 1:] + b.reshape(1, 4, 1, 1), [tensor("w", w), tensor("b", b)])
    x = rand(1, 2, 3, 3, seed=16)
    w = rand(2, 2, 3, 3, seed=17)
    case("conv_transpose_output_shape",
         [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                           output_shape=[6, 6])],
         x, F.conv_transpose2d(x, w, stride=2)[:, :, 1:, 1:], [tensor("w", w)])
    x = rand(1, 3, 2, 3, 2, seed=18)
    w = rand(3, 2, 2, 2, 2, seed=19)
    case("conv_transpose3d",
         [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2, 2])],
         x, F.conv_transpose3d(x, w, stride=2), [tensor("w", w)])

    x = rand(3, 4, seed=20)
    wb = rand(4, 5, seed=21)
    c = rand(5, seed=22)
    case("gemm_alpha_beta",
         [helper.make_node("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
         x, 0.5 * x @ wb + 2.0 * c, [tensor("w", wb), tensor("c", c)])
    wt = rand(5, 4, seed=23)
    c2 = rand(1, 5, seed=24)
    case("gemm_trans_b", [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)],
         x, x @ wt.t() + c2, [tensor("w", wt), tensor("c", c2)])
    x = rand(2, 3, 4, seed=25)
    wm = rand(4, 6, seed=26)
    bm = rand(6, seed=27)
    case("matmul_add_bias",
         [helper.make_node("MatMul", ["x", "w"], ["h"]),
          helper.make_node("Add", ["h", "bias"], ["y"])],
         x, x @ wm + bm, [tensor("w", wm), tensor("bias", bm)])
    # A weight used through a Transpose (PyTorch's Linear on 3-D input, without folding).
    case("matmul_transposed_weight",
         [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
          helper.make_node("MatMul", ["x", "wt"], ["y"])],
         x, x @ wm, [tensor("w", wm.t().contiguous())])
    c = rand(3, 1, seed=28)
    for op, f in [("Add", torch.add), ("Sub", torch.sub), ("Mul", torch.mul),
                  ("Div", torch.div)]:
        case(f"{op.lower()}_broadcast", [helper.make_node(op, ["x", "c"], ["y"])],
             x, f(x, c), [tensor("c", c)])
    case("leaky_relu", [helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2)],
         x, F.leaky_relu(x, 0.2))
    case("sigmoid_tanh_relu",
         [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Tanh", ["s"], ["t"]),
          helper.make_node("Sub", ["t", "half"], ["u"]), helper.make_node("Relu", ["u"], ["y"])],
         x, torch.relu(torch.tanh(torch.sigmoid(x)) - 0.5), [tensor("half", np.float32(0.5))])
    case("softmax_axis2", [helper.make_node("Softmax", ["x"], ["y"], axis=2)],
         x, torch.softmax(x, 2))
    case("softmax_opset11_coerced", [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
         x, torch.softmax(x.reshape(2, 12), 1).reshape(2, 3, 4), opset=11)
    case("log_softmax_last", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)],
         x, torch.log_softmax(x, -1))

    x = rand(1, 2, 8, 8, seed=29)
    case("maxpool_pads_ceil",
         [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                           pads=[1, 1, 1, 1], ceil_mode=1)],
         x, F.max_pool2d(x, 3, 2, 1, ceil_mode=True))
    x5 = rand(1, 1, 5, 5, seed=30)
    case("maxpool_asymmetric",
         [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                           pads=[0, 0, 1, 1])],
         x5, F.max_pool2d(F.pad(x5, (0, 1, 0, 1), value=float("-inf")), 2, 2))
    x3 = rand(1, 1, 5, 5, 5, seed=31)
    case("maxpool3d_dilated",
         [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], dilations=[2, 2, 2])],
         x3, F.max_pool3d(x3, 2, 1, 0, dilation=2))
    # Windows that tile the volume (the last side's fifth plane left out): under a bf16 autocast
    # on the CPU, pooled by blocks in bf16.
    case("maxpool3d_tiles",
         [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 1, 2], strides=[2, 1, 2])],
         x3, F.max_pool3d(x3, (2, 1, 2), (2, 1, 2)))
    case("avgpool_exclude_pad",
         [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
         x, F.avg_pool2d(x, 3, 1, 1, count_include_pad=False))
    # pads [h_begin=1, w_begin=0, h_end=0, w_end=1], kernel 2, stride 1: averages of the input
    # values under each window, by loops.
    xa = x5[0, 0].numpy()
    ya = np.zeros((5, 5), np.float32)
    for i in range(5):
        for j in range(5):
            vals = [xa[r, s] for r in (i - 1, i) for s in (j, j + 1) if 0 <= r < 5 and 0 <= s < 5]
            ya[i, j] = np.mean(vals)
    case("avgpool_asymmetric",
         [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 0, 0, 1])],
         x5, torch.from_numpy(ya).reshape(1, 1, 5, 5))
    case("global_average_pool", [helper.make_node("GlobalAveragePool", ["x"], ["y"])],
         x, x.mean((2, 3), keepdim=True))

    x = rand(3, 4, 5, 6, seed=32)
    scale, bias = rand(4, seed=33), rand(4, seed=34)
    mean, var = rand(4, seed=35), rand(4, seed=36).abs() + 0.5
    case("batch_normalization",
         [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
         x, F.batch_norm(x, mean, var, scale, bias, training=False, eps=1e-3),
         [tensor("s", scale), tensor("b", bias), tensor("m", mean), tensor("v", var)],
         train=F.batch_norm(x, None, None, scale, bias, training=True, eps=1e-3))
    case("instance_normalization",
         [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
         x, F.instance_norm(x, weight=scale, bias=bias, eps=1e-4),
         [tensor("s", scale), tensor("b", bias)])

    x = rand(2, 3, 4, 5, seed=37)
    case("concat_last", [helper.make_node("Relu", ["x"], ["r"]),
                         helper.make_node("Concat", ["r", "x"], ["y"], axis=-1)],
         x, torch.cat([torch.relu(x), x], -1))
    case("flatten", [helper.make_node("Flatten", ["x"], ["y"])], x, x.reshape(2, 60))
    case("reshape_copy_dims",
         [helper.make_node("Reshape", ["x", "shape"], ["y"])],
         x, x.reshape(2, 12, 5), [tensor("shape", np.array([0, -1, 5], np.int64))])
    case("reshape_batch_minus_one",
         [helper.make_node("Reshape", ["x", "shape"], ["y"])],
         x, x.reshape(2, 60), [tensor("shape", np.array([-1, 60], np.int64))])
    case("transpose", [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
         x, x.permute(0, 2, 3, 1))
    xs = rand(2, 1, 3, 1, seed=38)
    case("squeeze_axes_input",
         [helper.make_node("Squeeze", ["x", "axes"], ["y"])],
         xs, xs.reshape(2, 1, 3), [tensor("axes", np.array([3], np.int64))])
    case("squeeze_opset11_attribute", [helper.make_node("Squeeze", ["x"], ["y"], axes=[1])],
         xs, xs.reshape(2, 3, 1), opset=11)
    xu = rand(2, 3, seed=39)
    case("unsqueeze_axes_input",
         [helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
         xu, xu.reshape(2, 1, 3, 1), [tensor("axes", np.array([1, -1], np.int64))])
    case("unsqueeze_opset11_attribute",
         [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[2])], xu, xu.reshape(2, 3, 1),
         opset=11)

    x = rand(2, 3, 4, 5, seed=40)
    empty = tensor("roi", np.zeros(0, np.float32))
    case("resize_nearest_asymmetric_floor",
         [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest",
                           coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
         x, F.interpolate(x, scale_factor=2, mode="nearest"),
         [empty, tensor("scales", np.array([1, 1, 2, 2], np.float32))])
    case("resize_linear_half_pixel",
         [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="linear")],
         x, F.interpolate(x, scale_factor=(2, 3), mode="bilinear", align_corners=False),
         [empty, tensor("scales", np.array([1, 1, 2, 3], np.float32))])
    case("resize_linear_align_corners_sizes",
         [helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                           coordinate_transformation_mode="align_corners")],
         x, F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True),
         [empty, tensor("sizes", np.array([2, 3, 7, 9], np.int64))])
    # Nearest with half_pixel and round_prefer_floor, from 4x5 to 6x7, by the formula.
    xn = x.numpy()
    yn = np.zeros((2, 3, 6, 7), np.float32)

    def nearest(o, n_in, n_out):
        s = (o + 0.5) * n_in / n_out - 0.5
        r = int(np.floor(s)) if s - np.floor(s) <= 0.5 else int(np.ceil(s))
        return min(max(r, 0), n_in - 1)
    for i in range(6):
        for j in range(7):
            yn[:, :, i, j] = xn[:, :, nearest(i, 4, 6), nearest(j, 5, 7)]
    case("resize_nearest_half_pixel_sizes",
         [helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="nearest")],
         x, torch.from_numpy(yn), [empty, tensor("sizes", np.array([2, 3, 6, 7], np.int64))])
    x3 = rand(1, 2, 3, 4, 5, seed=41)
    case("resize_trilinear",
         [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="linear")],
         x3, F.interpolate(x3, scale_factor=2, mode="trilinear", align_corners=False),
         [empty, tensor("scales", np.array([1, 1, 2, 2, 2], np.float32))])
    case("upsample_nearest",
         [helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
         x, F.interpolate(x, scale_factor=2, mode="nearest"),
         [tensor("scales", np.array([1, 1, 2, 2], np.float32))], opset=11, check=False)

    case("pad_constant",
         [helper.make_node("Pad", ["x", "pads", "value"], ["y"])],
         x, F.pad(x, (0, 0, 2, 1, 1, 3), value=1.5),
         [tensor("pads", np.array([0, 1, 2, 0, 0, 3, 1, 0], np.int64)),
          tensor("value", np.float32(1.5))])
    case("pad_reflect", [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
         x, F.pad(x, (2, 1, 1, 2), mode="reflect"),
         [tensor("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))])
    case("pad_edge_3d", [helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge")],
         x3, F.pad(x3, (1, 0, 0, 2, 1, 1), mode="replicate"),
         [tensor("pads", np.array([0, 0, 1, 0, 1, 0, 0, 1, 2, 0], np.int64))])
    case("constant_identity",
         [helper.make_node("Constant", [], ["k"],
                           value=helper.make_tensor("k", TensorProto.FLOAT, [5], [1, 2, 3, 4, 5])),
          helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Identity", ["m"], ["y"])],
         x, x * torch.tensor([1.0, 2, 3, 4, 5]))
    case("dropout", [helper.make_node("Dropout", ["x", "ratio", "training"], ["y"])],
         x, x, [tensor("ratio", np.float32(0.3)), tensor("training", np.bool_(True))])

    # The blocks of users' models beyond convolutions.
    x = rand(2, 3, 4, 5, seed=80)
    case("erf_sqrt_pow",
         [helper.make_node("Pow", ["x", "two"], ["p"]), helper.make_node("Sqrt", ["p"], ["s"]),
          helper.make_node("Erf", ["x"], ["e"]), helper.make_node("Add", ["s", "e"], ["y"])],
         x, torch.sqrt(x ** 2) + torch.erf(x), [tensor("two", np.float32(2.0))])
    # GELU as PyTorch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2))).
    case("gelu_exported",
         [helper.make_node("Div", ["x", "root2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
          helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
          helper.make_node("Mul", ["m", "half"], ["y"])],
         x, F.gelu(x), [tensor("root2", np.float32(np.sqrt(2.0))), tensor("one", np.float32(1.0)),
                        tensor("half", np.float32(0.5))])
    case("clip_relu6", [helper.make_node("Mul", ["x", "four"], ["m"]),
                        helper.make_node("Clip", ["m", "lo", "hi"], ["y"])],
         x, F.relu6(4 * x), [tensor("four", np.float32(4.0)), tensor("lo", np.float32(0.0)),
                             tensor("hi", np.float32(6.0))])
    case("clip_min_only", [helper.make_node("Clip", ["x", "lo", ""], ["y"])],
         x, torch.clamp(x, min=-0.5), [tensor("lo", np.float32(-0.5))])
    slope = rand(3, 1, 1, seed=81)
    case("prelu_per_channel", [helper.make_node("PRelu", ["x", "slope"], ["y"])],
         x, torch.where(x > 0, x, x * slope), [tensor("slope", slope)])
    case("reduce_mean_keepdims",
         [helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3])], x, x.mean((2, 3), True))
    case("reduce_mean_drop", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1],
                                               keepdims=0)], x, x.mean(-1))
    scale, shift = rand(4, 5, seed=82), rand(5, seed=83)
    case("layer_norm", [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"],
                                         axis=-2, epsilon=1e-5)],
         x, F.layer_norm(x, (4, 5), scale, shift.expand(4, 5)),
         [tensor("scale", scale), tensor("bias", shift)], opset=17)
    # PyTorch's x.view(x.size(0), -1): the shape from the input, its batch left free.
    case("view_flatten",
         [helper.make_node("Shape", ["x"], ["s"]),
          helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
          helper.make_node("Unsqueeze", ["b", "axes"], ["bu"]),
          helper.make_node("Concat", ["bu", "minus_one"], ["shape"], axis=0),
          helper.make_node("Reshape", ["x", "shape"], ["y"])],
         x, x.reshape(2, -1), [tensor("zero", np.array(0, np.int64)),
                               tensor("axes", np.array([0], np.int64)),
                               tensor("minus_one", np.array([-1], np.int64))])
    case("gather_channels", [helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)],
         x, x[:, [2, 0]], [tensor("idx", np.array([2, -3], np.int64))])
    return cases


def write_op_cases(folder):
    os.makedirs(folder, exist_ok=True)
    for name, (nodes, x, inits, expected, opset, extra) in op_cases().items():
        save_model(os.path.join(folder, name + ".onnx"), nodes,
                   [value("x", ["batch"] + list(x.shape[1:]))],
                   [value("y", ["batch"] + list(expected.shape[1:]))], inits, opset=opset,
                   check=extra.get("check", True))
        data = {"input": x.contiguous(), "expected": expected.contiguous()}
        if "train" in extra:
            data["train"] = extra["train"].contiguous()
        torch.save(data, os.path.join(folder, name + ".pt"))


# ---------------------------------------------------------------------------------------------
# A Keras model as tf2onnx writes it (examples/onnx/keras_graph.py): NHWC input, a Transpose to
# NCHW before the convolution and back after it, a Reshape to [-1, features], a Gemm with the
# kernel stored transposed, and a Softmax output; initializer names with the slashes and colons
# of TensorFlow.

def keras_reference(path):
    """examples/onnx/keras_graph.py's graph, and its outputs by PyTorch's functions."""
    gen = torch.Generator().manual_seed(5)
    model, kernel, dense = keras_graph.graph(gen)
    onnx.save(model, path)
    x = torch.randn(3, 28, 28, 1, generator=gen)
    h = torch.relu(F.conv2d(x.permute(0, 3, 1, 2), torch.from_numpy(kernel), padding=1))
    h = F.max_pool2d(h, 2).permute(0, 2, 3, 1).reshape(3, -1)
    y = torch.softmax(F.linear(h, torch.from_numpy(dense)), -1)
    return {"input": x, "train": y, "eval": y}


def keras_unet3d_reference(path):
    """examples/onnx/keras_unet3d.py's U-Net at 8^3, and its outputs by PyTorch's functions,
    channels-first as tandem feeds and reads the model."""
    model = keras_unet3d.graph((4, 8), seed=9, volume=8)
    onnx.save(model, path)
    x = torch.randn(4, 1, 8, 8, 8, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        y = keras_unet3d.forward(model, x.permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)
    return {"input": x, "train": y.contiguous(), "eval": y.contiguous()}


# ---------------------------------------------------------------------------------------------
# Graphs tandem refuses: (nodes, inputs, outputs, initializers, opset)

def refused_cases():
    x = value("x", ["batch", 3, 4])
    y = value("y", None)
    w = tensor("w", rand(4, 4, seed=50))
    shape = tensor("shape", np.array([2, 12], np.int64))
    cases = {
        "unsupported_operator": ([helper.make_node("Hardmax", ["x"], ["y"], name="hardmax0")],
                                 [x], [y], [], OPSET),
        "two_unsupported_operators": ([helper.make_node("Hardmax", ["x"], ["e"], name="hardmax0"),
                                       helper.make_node("Gelu", ["e"], ["y"], domain="com.example",
                                                        name="gelu0")], [x], [y], [], OPSET),
        "custom_domain": ([helper.make_node("Gelu", ["x"], ["y"], domain="com.example",
                                            name="gelu0")], [x], [y], [], OPSET),
        "second_input": ([helper.make_node("Add", ["x", "x2"], ["y"])],
                         [x, value("x2", ["batch", 3, 4])], [y], [], OPSET),
        "reshape_fixed_batch": ([helper.make_node("Reshape", ["x", "shape"], ["y"],
                                                  name="flat")], [x], [y], [shape], OPSET),
        # A shape computed with the batch size (x.view(2 * x.size(0), -1)): tandem leaves the
        # batch free, so it cannot compute with it.
        "batch_size_arithmetic": ([
            helper.make_node("Shape", ["x"], ["s"], name="shape_of_x"),
            helper.make_node("Gather", ["s", "zero"], ["b"], axis=0, name="batch"),
            helper.make_node("Mul", ["b", "two"], ["b2"], name="double_batch"),
            helper.make_node("Unsqueeze", ["b2", "axes"], ["b2u"], name="unsq"),
            helper.make_node("Concat", ["b2u", "minus_one"], ["shape"], axis=0, name="cat"),
            helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], [x], [y],
            [tensor("zero", np.array(0, np.int64)), tensor("two", np.array(2, np.int64)),
             tensor("axes", np.array([0], np.int64)),
             tensor("minus_one", np.array([-1], np.int64))], OPSET),
        "reshape_by_batched_tensor": ([
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Reshape", ["x", "r"], ["y"], name="reshape")], [x], [y], [], OPSET),
        "transpose_batch": ([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2],
                                              name="swap")], [x], [y], [], OPSET),
        "flatten_axis0": ([helper.make_node("Flatten", ["x"], ["y"], axis=0, name="flat0")],
                          [x], [y], [], OPSET),
        "concat_batch_axis": ([helper.make_node("Concat", ["x", "x"], ["y"], axis=0,
                                                name="cat0")], [x], [y], [], OPSET),
        "softmax_batch_axis": ([helper.make_node("Softmax", ["x"], ["y"], axis=0,
                                                 name="soft0")], [x], [y], [], OPSET),
        "unsqueeze_batch_axis": ([helper.make_node("Unsqueeze", ["x", "axes"], ["y"],
                                                   name="unsq0")], [x], [y],
                                 [tensor("axes", np.array([0], np.int64))], OPSET),
        "opset_10": ([helper.make_node("Relu", ["x"], ["y"])], [x], [y], [], 10),
        "opset_18": ([helper.make_node("Relu", ["x"], ["y"])], [x], [y], [], 18),
        "tied_weights": ([helper.make_node("MatMul", ["x", "w"], ["h"], name="first"),
                          helper.make_node("Relu", ["h"], ["r"]),
                          helper.make_node("MatMul", ["r", "w"], ["y"], name="second")],
                         [x], [y], [w], OPSET),
        "batchnorm_statistics_read": ([
            helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                             ["n", "mean_out", "var_out"], name="bn", training_mode=1),
            helper.make_node("Add", ["n", "mean_out"], ["y"])],
            [x], [y], [tensor("s", np.ones(3, np.float32)), tensor("b", np.zeros(3, np.float32)),
                       tensor("m", np.zeros(3, np.float32)), tensor("v", np.ones(3, np.float32))],
            15),
        "maxpool_indices_read": ([
            helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2], name="pool"),
            helper.make_node("Identity", ["i"], ["y"])], [x], [y], [], OPSET),
        "two_outputs": ([helper.make_node("Relu", ["x"], ["a"]),
                         helper.make_node("Sigmoid", ["x"], ["b"])],
                        [x], [value("a", None), value("b", None)], [], OPSET),
        "softmax_not_over_classes": ([helper.make_node("Softmax", ["x"], ["y"], axis=2,
                                                       name="soft2")], [x], [y], [], OPSET),
        "double_weights": ([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [y],
                           [tensor("w", np.ones((4, 4), np.float64))], OPSET),
        "integer_input": ([helper.make_node("Identity", ["x"], ["y"])],
                          [value("x", ["batch", 3], TensorProto.INT64)], [y], [], OPSET),
    }
    return cases


def write_refused(folder):
    os.makedirs(folder, exist_ok=True)
    for name, (nodes, inputs, outputs, inits, opset) in refused_cases().items():
        save_model(os.path.join(folder, name + ".onnx"), nodes, inputs, outputs, inits,
                   opset=opset, check=False)
    with open(os.path.join(folder, "not_onnx.onnx"), "w") as f:
        f.write("this is not a protobuf\n")
    # An initializer kept in an external file.
    relu = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([relu], "external", [value("x", ["batch", 4])], [value("y", None)],
                              [tensor("w", np.ones((4, 4), np.float32))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(model, os.path.join(folder, "external_data.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="external_data.bin", size_threshold=0)

# ---------------------------------------------------------------------------------------------
# Graphs under a spatial split (--spatial): name -> (nodes, initializers, input shape). Every
# graph reads x [batch,2,8,4,4] and writes y; slabs_test.cc says what each must give.

def slab_cases():
    def conv(name, x, y, cin, cout, k, seed, **attrs):
        w = tensor(name + ".w", rand(cout, cin, *k, seed=seed).numpy() * 0.3)
        b = tensor(name + ".b", rand(cout, seed=seed + 1).numpy() * 0.1)
        return helper.make_node("Conv", [x, name + ".w", name + ".b"], [y], name=name,
                                **attrs), [w, b]

    def one(node_attrs_op, *inputs, inits=(), **attrs):
        return [helper.make_node(node_attrs_op, ["x", *inputs], ["y"], name="n", **attrs)], \
            list(inits)

    cases = {}
    for name, k, attrs in [("conv_same", (3, 3, 3), dict(pads=[1] * 6)),
                           ("conv_5_same", (5, 3, 3), dict(pads=[2, 1, 1, 2, 1, 1])),
                           ("conv_auto_same", (3, 3, 3), dict(auto_pad="SAME_UPPER")),
                           ("conv_strided_padded", (3, 3, 3),
                            dict(pads=[1] * 6, strides=[2, 2, 2])),
                           ("conv_valid", (3, 1, 1), dict())]:
        node, inits = conv("n", "x", "y", 2, 2, k, 60, **attrs)
        cases[name] = ([node], inits)
    node, inits = conv("down", "x", "d", 2, 2, (2, 2, 2), 61, strides=[2, 2, 2])
    cases["conv_blocks_then_nearest"] = ([node, helper.make_node(
        "Resize", ["d", "", "scales"], ["y"], name="up", mode="nearest",
        coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        inits + [tensor("scales", np.array([1, 1, 2, 2, 2], np.float32))])
    cases["pool_overlapping"] = one("MaxPool", kernel_shape=[3, 3, 3], strides=[2, 2, 2],
                                    pads=[1] * 6)
    cases["resize_linear_depth"] = one(
        "Resize", "", "scales", inits=[tensor("scales", np.array([1, 1, 2, 1, 1], np.float32))],
        mode="linear")
    cases["resize_linear_plane"] = one(
        "Resize", "", "scales", inits=[tensor("scales", np.array([1, 1, 1, 2, 2], np.float32))],
        mode="linear")
    cases["resize_sizes"] = one(
        "Resize", "", "", "sizes", inits=[tensor("sizes", np.array([1, 2, 16, 4, 4], np.int64))],
        mode="nearest")
    cases["concat_depth"] = ([helper.make_node("Concat", ["x", "x"], ["c"], axis=2, name="n"),
                              helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 1, 1],
                                               strides=[2, 1, 1])], [])
    cases["softmax_depth"] = one("Softmax", axis=2)
    cases["transpose_plane"] = one("Transpose", perm=[0, 1, 2, 4, 3])
    cases["transpose_depth"] = one("Transpose", perm=[0, 1, 3, 2, 4])
    # The depth moved and back, as tf2onnx writes a Keras layer (a channels-last Concat and a
    # bias added on the last axis between) before a convolution; a convolution on the moved
    # depth; Reshapes that
    # keep the planes whole (the depth copied, or inferred), and one that merges them.
    to_last = dict(perm=[0, 2, 3, 4, 1])
    cases["transpose_there_and_back"] = ([
        helper.make_node("Transpose", ["x"], ["t"], name="to_last", **to_last),
        helper.make_node("Concat", ["t", "t"], ["c"], axis=-1, name="cat"),
        helper.make_node("Add", ["c", "bias"], ["a"], name="bias"),
        helper.make_node("Transpose", ["a"], ["b"], perm=[0, 4, 1, 2, 3], name="to_first"),
        helper.make_node("Conv", ["b", "w"], ["y"], pads=[1] * 6, name="conv")],
        [tensor("bias", rand(4, seed=74).numpy()),
         tensor("w", rand(2, 4, 3, 3, 3, seed=76).numpy() * 0.3)])
    node, inits = conv("n", "t", "y", 2, 2, (1, 1, 1), 75)
    cases["conv_on_moved_depth"] = ([helper.make_node("Transpose", ["x"], ["t"], name="swap",
                                                      perm=[0, 1, 3, 2, 4]), node], inits)
    cases["reshape_planes_kept"] = ([
        helper.make_node("Reshape", ["x", "flat"], ["f"], name="flat"),
        helper.make_node("Relu", ["f"], ["r"]),
        helper.make_node("Reshape", ["r", "back"], ["y"], name="back")],
        [tensor("flat", np.array([0, 0, 0, 16], np.int64)),
         tensor("back", np.array([0, 2, -1, 4, 4], np.int64))])
    cases["reshape_depth_merged"] = ([
        helper.make_node("Reshape", ["x", "flat"], ["f"], name="n"),
        helper.make_node("Reshape", ["f", "back"], ["y"], name="back")],
        [tensor("flat", np.array([0, 0, -1], np.int64)),
         tensor("back", np.array([0, 2, 8, 4, 4], np.int64))])
    cases["pad_depth"] = one("Pad", "pads", inits=[tensor(
        "pads", np.array([0, 0, 1, 0, 0, 0, 0, 1, 0, 0], np.int64))])
    cases["pad_plane"] = one("Pad", "pads", inits=[tensor(
        "pads", np.array([0, 0, 0, 1, 1, 0, 0, 0, 1, 1], np.int64))])
    cases["add_per_channel"] = one("Add", "bias", inits=[tensor(
        "bias", np.ones((2, 1, 1, 1), np.float32))])
    cases["add_per_plane"] = one("Add", "ramp", inits=[tensor(
        "ramp", np.arange(8, dtype=np.float32).reshape(8, 1, 1))])
    cases["global_pool"] = ([helper.make_node("GlobalAveragePool", ["x"], ["g"], name="n"),
                             helper.make_node("Add", ["x", "g"], ["y"])], [])
    cases["batch_norm"] = one("BatchNormalization", "s", "b", "m", "v", inits=[
        tensor("s", np.ones(2, np.float32)), tensor("b", np.zeros(2, np.float32)),
        tensor("m", np.zeros(2, np.float32)), tensor("v", np.ones(2, np.float32))])
    cases["flatten"] = ([helper.make_node("Flatten", ["x"], ["f"], name="n"),
                         helper.make_node("Reshape", ["f", "shape"], ["y"])],
                        [tensor("shape", np.array([-1, 2, 8, 4, 4], np.int64))])
    # A small segmentation net of three classes: conv, instance norm, pooling, nearest
    # up-sampling, a skip added back, a 1x1x1 conv and a softmax over the classes.
    a, a_inits = conv("enc", "x", "e", 2, 3, (3, 3, 3), 62, pads=[1] * 6)
    b, b_inits = conv("mid", "p", "m", 3, 3, (3, 3, 3), 64, pads=[1] * 6)
    c, c_inits = conv("out", "s", "logits", 3, 3, (1, 1, 1), 66)
    cases["segmentation"] = ([
        a,
        helper.make_node("InstanceNormalization", ["e", "in.s", "in.b"], ["en"], name="norm"),
        helper.make_node("Relu", ["en"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2],
                         name="pool"),
        b,
        helper.make_node("Resize", ["m", "", "scales"], ["u"], name="up", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Add", ["u", "r"], ["s"], name="skip"),
        c,
        helper.make_node("Softmax", ["logits"], ["y"], axis=1, name="soft")],
        a_inits + b_inits + c_inits +
        [tensor("in.s", 1 + 0.1 * rand(3, seed=68).numpy()),
         tensor("in.b", 0.1 * rand(3, seed=69).numpy()),
         tensor("scales", np.array([1, 1, 2, 2, 2], np.float32))])
    # The halo convolution's other kernels: a grouped convolution (weight [C_out, C_in / 2,
    # k...]) dilated along the depth (halo 2), padded unevenly across a plane (0 and 2), then a
    # 1x1x1 convolution (no halo) and a softmax over three classes.
    d, d_inits = conv("dil", "x", "h", 1, 4, (3, 3, 3), 70, group=2, dilations=[2, 1, 1],
                      pads=[2, 1, 0, 2, 1, 2])
    o, o_inits = conv("cls", "r", "logits", 4, 3, (1, 1, 1), 72)
    cases["dilated"] = ([d, helper.make_node("Relu", ["h"], ["r"], name="relu"), o,
                         helper.make_node("Softmax", ["logits"], ["y"], axis=1, name="soft")],
                        d_inits + o_inits)
    return cases


def write_slabs(folder):
    os.makedirs(folder, exist_ok=True)
    for name, (nodes, inits) in slab_cases().items():
        save_model(os.path.join(folder, name + ".onnx"), nodes, [value("x", ["batch", 2, 8, 4, 4])],
                   [value("y", None)], inits, check=False)
    save_model(os.path.join(folder, "vector_input.onnx"), [helper.make_node("Relu", ["x"], ["y"])],
               [value("x", ["batch", 8])], [value("y", None)], check=False)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (_, _, _, _, shape, _) in torch_models.MODELS.items():
        torch_models.export(torch_models.build(name), os.path.join(out, name + ".onnx"), shape)
        torch.save(torch_models.forward_reference(name), os.path.join(out, name + "_forward.pt"))
        torch.save(torch_models.batches(name), os.path.join(out, name + "_batches.pt"))
    torch.save(keras_reference(os.path.join(out, "keras.onnx")),
               os.path.join(out, "keras_forward.pt"))
    torch.save(keras_unet3d_reference(os.path.join(out, "keras_unet3d.onnx")),
               os.path.join(out, "keras_unet3d_forward.pt"))
    write_op_cases(os.path.join(out, "ops"))
    write_refused(os.path.join(out, "refused"))
    write_slabs(os.path.join(out, "slabs"))
    # Volume models of any size for the memory plan's checks (plan_check.py).
    os.makedirs(os.path.join(out, "plan"), exist_ok=True)
    torch.manual_seed(11)
    torch_models.export_volume_model(torch_models.PlanUnet(),
                                     os.path.join(out, "plan", "unet.onnx"))
    torch_models.export_volume_model(torch_models.build("unet3d"),
                                     os.path.join(out, "plan", "unet_small.onnx"))
    # Scans for tandem predict's checks before work: one channel of 40^3, and two channels.
    gen = torch.Generator().manual_seed(12)
    np.save(os.path.join(out, "plan", "scan40.npy"), torch.rand(1, 40, 40, 40, generator=gen).numpy())
    np.save(os.path.join(out, "plan", "two_channels.npy"),
            torch.rand(2, 16, 16, 16, generator=gen).numpy())


if __name__ == "__main__":
    main()
