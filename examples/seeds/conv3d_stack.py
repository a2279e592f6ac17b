"""A stack of 3D convolutions regressing volumes (mean squared error), its layers on two devices,
and the backward of every layer on the device that holds it.

The model as a TensorFlow user writes it, here in PyTorch: 10 Conv3D layers of 256 filters
(3x3x3, "same" padding, ReLU) and a 1x1x1 convolution to the target's one channel.

    python3 examples/seeds/conv3d_stack.py export stack.onnx --arrays volumes --sample scan.npy
    build/tandem verify --model stack.onnx --loss mse --data npy:volumes --devices 2 \\
        --batch 4 --microbatches 2
    build/tandem train --model stack.onnx --loss mse --data npy:volumes --devices 2 \\
        --batch 4 --microbatches 2 --epochs 2 --log-placement --save-dir runs/stack
    build/tandem consolidate runs/stack -o trained.pt
    build/tandem predict --model stack.onnx --loss mse --checkpoint runs/stack \\
        --input scan.npy --output predicted.npy --standardize none
    python3 examples/seeds/conv3d_stack.py load trained.pt --sample scan.npy \\
        --predicted predicted.npy

On two GPUs, `--devices cuda:0,cuda:1`. In tandem a layer's backward always runs on the device
of its forward; `tandem verify` shows it: it runs one training step split over the devices and
the same step on one device, prints a row per parameter with its stage, the devices its
forward and its backward ran on, its gradient on both and their difference, and exits with
status 0 only when every gradient agrees. `--log-placement` prints the two devices of every
layer of a training run, as the run recorded them. `--arrays DIR` writes an `npy:DIR` folder
of noise volumes and their 3x3x3 local means (train_x.npy and train_y.npy [N,1,S,S,S]); a
folder of your own volumes in that form trains the same way (docs/data.md).

`load` puts the weights tandem trained into the PyTorch module (a strict load_state_dict: the
ONNX initializers keep the state-dict names), says how far they moved from the exported ones,
and, given `--sample` and tandem predict's output for it, checks that the module's forward on
the sample gives the same volume. The sample is 1.5 times the training volumes' side: the
export makes depth, height and width dynamic, so predict takes a whole volume of any size;
`--standardize none` gives the model its values as they are, as the module gets them.
`--small` is the same model in miniature: 10 layers of 8 filters on 8^3 volumes.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Shapes: B batch, C channels, S the side of a volume; a sample is [C,S,S,S].


class Conv3dStack(nn.Module):
    def __init__(self, convs=10, filters=256):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv3d(1 if i == 0 else filters, filters, 3, padding=1) for i in range(convs))
        self.out = nn.Conv3d(filters, 1, 1)

    def forward(self, x):  # [B,1,S,S,S] -> [B,1,S,S,S]
        for conv in self.convs:
            x = F.relu(conv(x))
        return self.out(x)


def sizes(args):
    """(convs, filters, volume, training samples): the user's, or the small ones."""
    if args.small:
        return 10, 8, 8, 16
    return args.convs, args.filters, args.volume, args.samples


def build(args):
    convs, filters, _, _ = sizes(args)
    torch.manual_seed(args.seed)  # the seed's weights: export and load build the same module
    return Conv3dStack(convs, filters)


def export(model, volume, path):
    """For training: the initializers keep the state-dict names (`convs.0.weight`). Batch,
    depth, height and width are dynamic, so tandem predict takes whole volumes of any size."""
    axes = {0: "batch", 2: "depth", 3: "height", 4: "width"}
    torch.onnx.export(model, torch.randn(2, 1, volume, volume, volume), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": axes, "output": axes})


def write_arrays(folder, samples, volume, seed):
    """An npy:DIR folder: noise volumes and their 3x3x3 local means, float32."""
    os.makedirs(folder, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    for split, n in (("train", samples), ("test", max(samples // 4, 2))):
        x = torch.randn(n, 1, volume, volume, volume, generator=gen)
        y = F.avg_pool3d(x, 3, stride=1, padding=1, count_include_pad=False)
        np.save(os.path.join(folder, f"{split}_x.npy"), x.numpy())
        np.save(os.path.join(folder, f"{split}_y.npy"), y.numpy())


def moved(trained, initial):
    """How many tensors differ from the exported ones, and the largest change."""
    changes = [(trained[k] - initial[k]).abs().max().item() for k in initial]
    return sum(c > 0 for c in changes), max(changes)


def same_output(mine, theirs, what):
    """Within 1e-5 of the output's largest magnitude (at least 1): float32 sums taken in
    another order (tandem convolves in chunks of planes) differ by a few units of rounding."""
    if mine.shape != theirs.shape:
        raise SystemExit(f"{what}: shape {list(theirs.shape)}, but the module gives "
                         f"{list(mine.shape)}")
    diff = float(np.abs(mine - theirs).max())
    allowed = 1e-5 * max(1.0, float(np.abs(theirs).max()))
    if diff > allowed:
        raise SystemExit(f"{what} differs from the module's forward by {diff:.3g} "
                         f"(allowed {allowed:.3g})")
    return diff


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["export", "load"])
    p.add_argument("path", help="export: the .onnx to write; load: tandem consolidate's .pt")
    p.add_argument("--convs", type=int, default=10, help="3x3x3 convolutions (default 10)")
    p.add_argument("--filters", type=int, default=256, help="filters of each (default 256)")
    p.add_argument("--volume", type=int, default=32, help="side of the volumes (default 32)")
    p.add_argument("--samples", type=int, default=64, help="training volumes (default 64)")
    p.add_argument("--small", action="store_true",
                   help="10 convolutions of 8 filters on 16 volumes of 8^3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arrays", help="export: also write an npy:DIR folder of volumes here")
    p.add_argument("--sample", help="export: write a fixed volume here, 1.5 times the "
                                    "side of the training volumes [1,D,H,W]; "
                                    "load: the volume tandem predict was given")
    p.add_argument("--predicted", help="load: tandem predict's output for --sample")
    args = p.parse_args()
    _, _, volume, samples = sizes(args)
    model = build(args)
    if args.action == "export":
        os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
        export(model, volume, args.path)
        print(f"wrote {args.path}")
        if args.arrays:
            write_arrays(args.arrays, samples, volume, args.seed + 1)
            print(f"wrote {args.arrays}/train_x.npy, train_y.npy, test_x.npy, test_y.npy")
        if args.sample:
            side = volume + volume // 2  # another size than training's: the axes are dynamic
            gen = torch.Generator().manual_seed(args.seed + 2)
            np.save(args.sample, torch.randn(1, side, side, side, generator=gen).numpy())
            print(f"wrote {args.sample}")
        return
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    trained = torch.load(args.path)
    model.load_state_dict(trained)  # strict: every name and shape must match
    changed, largest = moved(trained, initial)
    print(f"loaded {args.path} into Conv3dStack: {len(trained)} tensors, {changed} moved from "
          f"the exported weights (largest change {largest:.3g})")
    if changed == 0:
        raise SystemExit(f"{args.path} holds the exported weights: no training step changed them")
    if args.sample and args.predicted:
        x = torch.from_numpy(np.load(args.sample))  # [1,S,S,S] = [C,D,H,W]
        with torch.no_grad():
            mine = model(x[None])[0, 0].numpy()  # one output channel: predict writes [D,H,W]
        diff = same_output(mine, np.load(args.predicted), args.predicted)
        print(f"the module's forward on {args.sample} equals {args.predicted} "
              f"(largest difference {diff:.3g})")


if __name__ == "__main__":
    main()
