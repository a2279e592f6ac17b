"""Writes an ONNX graph the way tf2onnx writes a small Keras CNN for MNIST
(python3 keras_graph.py keras.onnx), to try tandem's Keras path without TensorFlow:

    inputs = keras.Input((28, 28, 1))                 # NHWC
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(10, activation="softmax")(x)

tf2onnx (python3 -m tf2onnx.convert --saved-model DIR --opset 13 --output keras.onnx) turns the
NHWC convolution into Transpose -> Conv -> Transpose, Flatten into a Reshape to [-1, 784], and
Dense into a Gemm whose kernel it stores transposed ([10, 784], transB=1), ending in Softmax;
initializers carry TensorFlow's variable names.
"""
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper


def graph(gen):
    """The model and its initial weights (from the torch.Generator `gen`)."""
    kernel = (torch.randn(4, 1, 3, 3, generator=gen) * 0.3).numpy()
    dense = (torch.randn(10, 4 * 14 * 14, generator=gen) * 0.05).numpy()
    conv_w, conv_b = "sequential/conv2d/Conv2D/ReadVariableOp:0", "sequential/conv2d/BiasAdd/ReadVariableOp:0"
    dense_w, dense_b = "sequential/dense/MatMul/ReadVariableOp:0", "sequential/dense/BiasAdd/ReadVariableOp:0"
    nodes = [
        helper.make_node("Transpose", ["input_1"], ["conv_in"], perm=[0, 3, 1, 2],
                         name="sequential/conv2d/Conv2D__6"),
        helper.make_node("Conv", ["conv_in", conv_w, conv_b], ["conv_out"], auto_pad="SAME_UPPER",
                         kernel_shape=[3, 3], name="sequential/conv2d/BiasAdd"),
        helper.make_node("Relu", ["conv_out"], ["relu"], name="sequential/conv2d/Relu"),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2],
                         name="sequential/max_pooling2d/MaxPool"),
        helper.make_node("Transpose", ["pool"], ["nhwc"], perm=[0, 2, 3, 1],
                         name="sequential/max_pooling2d/MaxPool__12"),
        helper.make_node("Reshape", ["nhwc", "const_fold_opt__20"], ["flat"],
                         name="sequential/flatten/Reshape"),
        helper.make_node("Gemm", ["flat", dense_w, dense_b], ["logits"], transB=1,
                         name="sequential/dense/MatMul"),
        helper.make_node("Softmax", ["logits"], ["dense"], axis=-1, name="sequential/dense/Softmax"),
    ]
    inits = [numpy_helper.from_array(kernel, conv_w),
             numpy_helper.from_array(np.zeros(4, np.float32), conv_b),
             numpy_helper.from_array(np.array([-1, 4 * 14 * 14], np.int64), "const_fold_opt__20"),
             numpy_helper.from_array(dense, dense_w),
             numpy_helper.from_array(np.zeros(10, np.float32), dense_b)]
    g = helper.make_graph(
        nodes, "tf2onnx",
        [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["unk__30", 28, 28, 1])],
        [helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["unk__31", 10])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model, kernel, dense


if __name__ == "__main__":
    onnx.save(graph(torch.Generator().manual_seed(5))[0], sys.argv[1])
    print(f"wrote {sys.argv[1]}")
