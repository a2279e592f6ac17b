"""python3 check_export.py TRAINED.onnx STATE.pt: onnx.checker accepts the exported model, each
of its initializers named in tandem's consolidated state dict holds exactly that tensor
(num_batches_tracked, which has no initializer, excepted), and it is an inference graph: no
Dropout has a training_mode input, every BatchNormalization says training_mode 0 and has one
output."""
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

model = onnx.load(sys.argv[1])
onnx.checker.check_model(model)
state = torch.load(sys.argv[2])
initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
compared = 0
for name, tensor in state.items():
    if name.endswith("num_batches_tracked"):
        continue
    if not np.array_equal(initializers[name], tensor.numpy()):
        sys.exit(f"{sys.argv[1]}: initializer {name} differs from {sys.argv[2]}")
    compared += 1
for node in model.graph.node:
    mode = {a.name: a.i for a in node.attribute}.get("training_mode", 0)
    if (node.op_type == "Dropout" and len(node.input) > 2) or (
            node.op_type == "BatchNormalization" and (mode != 0 or len(node.output) != 1)):
        sys.exit(f"{sys.argv[1]}: {node.op_type} '{node.name}' is in training mode")
print(f"{sys.argv[1]}: onnx.checker accepts it; an inference graph; {compared} initializers equal the state dict")
