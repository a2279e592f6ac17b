"""Writes an ONNX graph the way tf2onnx writes a channels-last Keras 3D U-Net
(python3 keras_unet3d.py unet.onnx [--filters 8,16,32]), to try tandem's Keras path, slabs
included, without TensorFlow:

    inputs = keras.Input((None, None, None, 1))                       # NDHWC
    x, skips = inputs, []
    for f in filters[:-1]:                                            # the encoder
        x = layers.Conv3D(f, 3, padding="same", activation="relu")(x)
        x = layers.Conv3D(f, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = layers.MaxPooling3D(2)(x)
    x = layers.Conv3D(filters[-1], 3, padding="same", activation="relu")(x)   # the bottom
    for f, skip in zip(reversed(filters[:-1]), reversed(skips)):     # the decoder
        x = layers.Conv3DTranspose(f, 2, strides=2)(x)
        x = layers.Concatenate()([x, skip])                           # channels: axis -1
        x = layers.Conv3D(f, 3, padding="same", activation="relu")(x)
    outputs = layers.Conv3D(1, 1, activation="sigmoid")(x)

tf2onnx (python3 -m tf2onnx.convert --saved-model DIR --opset 13 --output unet.onnx) keeps the
NDHWC input and output: a Transpose to NCDHW after the input, one back to NDHWC after the
Sigmoid. Its transpose optimizer moves the others out of the graph; where it leaves them (here
the first level's concatenation, written as tf2onnx writes it before optimizing: both parts to
NDHWC, Concat on axis -1, back to NCDHW), the depth moves between axes 1 and 2. Kernels are
stored as ONNX wants them ([out, in, k, k, k]; [in, out, k, k, k] for the transposed
convolution); initializers carry TensorFlow's variable names.

tandem feeds the model channels-first ([B,C,D,H,W], as it reads NIfTI volumes) and reads its
output channels-first: it takes the two outer Transposes over (docs/models.md).
"""
import argparse

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper


def graph(filters=(4, 8), seed=0, volume=None):
    """The model (onnx.ModelProto) with weights drawn from torch.Generator(seed); for volumes
    of any size, or of `volume`^3 voxels (Keras's Input((S, S, S, 1)))."""
    gen = torch.Generator().manual_seed(seed)
    nodes, inits = [], []
    count = {"conv3d": 0, "conv3d_transpose": 0}

    def name(kind):
        k = count[kind]
        count[kind] += 1
        return kind if k == 0 else f"{kind}_{k}"

    def weight(var, shape, fan_in):
        array = (torch.randn(*shape, generator=gen) * (2.0 / fan_in) ** 0.5).numpy()
        inits.append(numpy_helper.from_array(array.astype(np.float32), var))
        return var

    def bias(var, n):
        inits.append(numpy_helper.from_array(
            (torch.randn(n, generator=gen) * 0.05).numpy().astype(np.float32), var))
        return var

    def conv(x, cin, cout, k, activation):
        layer = name("conv3d")
        w = weight(f"model/{layer}/Conv3D/ReadVariableOp:0", (cout, cin, k, k, k), cin * k ** 3)
        b = bias(f"model/{layer}/BiasAdd/ReadVariableOp:0", cout)
        y = f"model/{layer}/BiasAdd:0"
        attrs = dict(kernel_shape=[k] * 3, strides=[1] * 3, dilations=[1] * 3)
        if k > 1:
            attrs["auto_pad"] = "SAME_UPPER"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], name=f"model/{layer}/BiasAdd",
                                      **attrs))
        out = f"model/{layer}/{activation}:0"
        nodes.append(helper.make_node(activation, [y], [out], name=f"model/{layer}/{activation}"))
        return out

    def transpose(x, perm, label):
        y = f"{x}__{label}"
        nodes.append(helper.make_node("Transpose", [x], [y], perm=perm, name=f"{x}__{label}"))
        return y

    x = transpose("input_1", [0, 4, 1, 2, 3], "to_ncdhw")
    cin, skips = 1, []
    for level, f in enumerate(filters[:-1]):
        x = conv(conv(x, cin, f, 3, "Relu"), f, f, 3, "Relu")
        skips.append((x, f))
        pool = f"model/max_pooling3d{'' if level == 0 else f'_{level}'}/MaxPool3D:0"
        nodes.append(helper.make_node("MaxPool", [x], [pool], kernel_shape=[2, 2, 2],
                                      strides=[2, 2, 2], name=pool[:-2]))
        x, cin = pool, f
    x = conv(x, cin, filters[-1], 3, "Relu")
    cin = filters[-1]
    for level, (skip, f) in reversed(list(enumerate(skips))):
        layer = name("conv3d_transpose")
        w = weight(f"model/{layer}/conv3d_transpose/ReadVariableOp:0", (cin, f, 2, 2, 2), cin * 8)
        b = bias(f"model/{layer}/BiasAdd/ReadVariableOp:0", f)
        up = f"model/{layer}/BiasAdd:0"
        nodes.append(helper.make_node("ConvTranspose", [x, w, b], [up], kernel_shape=[2, 2, 2],
                                      strides=[2, 2, 2], name=f"model/{layer}/BiasAdd"))
        cat = f"model/concatenate{'' if level == 0 else f'_{level}'}/concat:0"
        if level == 0:
            # As tf2onnx writes it before its optimizer: the concatenation in NDHWC.
            parts = [transpose(up, [0, 2, 3, 4, 1], "to_ndhwc"),
                     transpose(skip, [0, 2, 3, 4, 1], "to_ndhwc")]
            nhwc = cat + "__ndhwc"
            nodes.append(helper.make_node("Concat", parts, [nhwc], axis=-1, name=cat[:-2]))
            cat = transpose(nhwc, [0, 4, 1, 2, 3], "to_ncdhw")
        else:
            nodes.append(helper.make_node("Concat", [up, skip], [cat], axis=1, name=cat[:-2]))
        x, cin = conv(cat, 2 * f, f, 3, "Relu"), f
    x = conv(x, cin, 1, 1, "Sigmoid")
    nodes.append(helper.make_node("Transpose", [x], ["conv3d_out"], perm=[0, 2, 3, 4, 1],
                                  name="model/output/Sigmoid__to_ndhwc"))
    space = [volume] * 3 if volume else ["unk__1", "unk__2", "unk__3"]
    g = helper.make_graph(
        nodes, "tf2onnx",
        [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["unk__0", *space, 1])],
        [helper.make_tensor_value_info("conv3d_out", TensorProto.FLOAT, ["unk__0", *space, 1])],
        inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def forward(model, x):
    """The graph's output for x [B,D,H,W,1] (channels-last, as Keras takes it), by PyTorch's
    functions: the reference a test holds tandem's forward against."""
    import torch.nn.functional as F
    values = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
              for t in model.graph.initializer}
    values["input_1"] = x
    for n in model.graph.node:
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        ins = [values[i] for i in n.input]
        if n.op_type == "Transpose":
            y = ins[0].permute(*a["perm"])
        elif n.op_type == "Conv":
            y = F.conv3d(ins[0], ins[1], ins[2], padding=a["kernel_shape"][0] // 2)
        elif n.op_type == "ConvTranspose":
            y = F.conv_transpose3d(ins[0], ins[1], ins[2], stride=2)
        elif n.op_type == "MaxPool":
            y = F.max_pool3d(ins[0], 2)
        elif n.op_type == "Concat":
            y = torch.cat(ins, a["axis"])
        elif n.op_type == "Relu":
            y = torch.relu(ins[0])
        elif n.op_type == "Sigmoid":
            y = torch.sigmoid(ins[0])
        else:
            raise ValueError(n.op_type)
        values[n.output[0]] = y
    return values[model.graph.output[0].name]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--filters", default="4,8", help="filters per level, the bottom's last")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--volume", type=int, help="a fixed size S (S^3 volumes); default: any size")
    args = p.parse_args()
    onnx.save(graph(tuple(int(f) for f in args.filters.split(",")), args.seed, args.volume),
              args.path)
    print(f"wrote {args.path}")
