"""A PyTorch model trained by tandem: export it to ONNX, and load tandem's weights back.

  python3 from_pytorch.py export cnn.onnx           # a CNN with batch norm for MNIST [B,1,28,28]
  python3 from_pytorch.py export unet.onnx --unet   # a 3D U-Net with instance norm [B,1,S,S,S]
  python3 from_pytorch.py load trained.pt           # model.load_state_dict(torch.load(...))
  python3 from_pytorch.py load trained.pt --unet

The export keeps the module's state-dict names as the ONNX initializers' names
(training=TrainingMode.TRAINING, do_constant_folding=False); tandem trains them and
`tandem consolidate` writes them back under the same names.
"""
import argparse
import copy

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


class MnistCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):  # [B,1,28,28] -> [B,10] logits
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))  # flatten, not x.view(x.size(0), -1)


def block(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.InstanceNorm3d(cout, affine=True),
                         nn.ReLU(), nn.Conv3d(cout, cout, 3, padding=1),
                         nn.InstanceNorm3d(cout, affine=True), nn.ReLU())


class Unet3d(nn.Module):
    def __init__(self, f=8):
        super().__init__()
        self.enc = block(1, f)
        self.bottom = block(f, 2 * f)
        self.up = nn.ConvTranspose3d(2 * f, f, 2, stride=2)
        self.dec = block(2 * f, f)
        self.out = nn.Conv3d(f, 1, 1)

    def forward(self, x):  # [B,1,S,S,S] -> [B,1,S,S,S] probabilities, S even
        skip = self.enc(x)
        x = self.bottom(F.max_pool3d(skip, 2))
        x = self.dec(torch.cat([self.up(x), skip], 1))
        return torch.sigmoid(self.out(x))


def export(model, shape, path):
    """torch.onnx.export for training. Its trace runs one forward in training mode, which
    moves batch norm's running statistics; the file gets the module's own state back."""
    state = copy.deepcopy(model.state_dict())
    torch.onnx.export(model, torch.randn(shape), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    model.load_state_dict(state)
    exported = onnx.load(path)
    for t in exported.graph.initializer:
        if t.name in state:
            t.CopyFrom(numpy_helper.from_array(state[t.name].numpy(), t.name))
    onnx.save(exported, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["export", "load"])
    p.add_argument("path")
    p.add_argument("--unet", action="store_true")
    p.add_argument("--volume", type=int, default=16, help="U-Net: the side of the example input")
    args = p.parse_args()
    torch.manual_seed(0)
    model = Unet3d() if args.unet else MnistCnn()
    if args.action == "export":
        shape = (2, 1, args.volume, args.volume, args.volume) if args.unet else (2, 1, 28, 28)
        export(model, shape, args.path)
        print(f"wrote {args.path}")
    else:
        model.load_state_dict(torch.load(args.path))  # strict: every name must match
        n = sum(p.numel() for p in model.parameters())
        print(f"loaded {args.path} into {type(model).__name__} ({n} parameters)")


if __name__ == "__main__":
    main()
