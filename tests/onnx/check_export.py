"""python3 check_export.py TRAINED.onnx STATE.pt: onnx.checker accepts the exported model, and
each of its initializers named in tandem's consolidated state dict holds exactly that tensor
(num_batches_tracked, which has no initializer, excepted)."""
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
print(f"{sys.argv[1]}: onnx.checker accepts it; {compared} initializers equal the state dict")
