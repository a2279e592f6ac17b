"""A channels-last Keras 3D U-Net, as tf2onnx converts it, trained on volumes cut into depth
slabs (`--spatial`), and its trained weights back in Keras's get_weights order.

The model: Conv3D layers of 32, 64, 128, 256 and 512 filters (two per encoder level, one at
the bottom and one per decoder level), max pooling, Conv3DTranspose up, the skips
concatenated, a 1x1x1 Conv3D with a sigmoid; its graph is what tf2onnx writes for it
(examples/onnx/keras_unet3d.py: the NDHWC input and output, TensorFlow's variable names).

    python3 examples/seeds/keras_unet.py export unet.onnx --sample scan.npy
    build/tandem train --model unet.onnx --loss dice+bce --data spheres --volume 128 \\
        --devices 1 --batch 2 --microbatches 2 --plan-only --device-memory 2GiB
    build/tandem verify --model unet.onnx --loss dice+bce --data spheres --volume 32 \\
        --train-samples 4 --test-samples 0 --devices 2 --spatial 2 --batch 2 --microbatches 2
    build/tandem train --model unet.onnx --loss dice+bce --data spheres --volume 128 \\
        --devices 4 --spatial 2 --batch 2 --microbatches 2 --steps 200 --save-dir runs/unet
    build/tandem consolidate runs/unet -o trained.pt
    build/tandem predict --model unet.onnx --loss dice+bce --checkpoint runs/unet --spatial 2 \\
        --devices 2 --input scan.npy --output predicted.npy --standardize none
    python3 examples/seeds/keras_unet.py load trained.pt --sample scan.npy \\
        --predicted predicted.npy --keras-weights unet_keras.npz

The plan comes before any step: one device would hold 3.8 GiB for this batch of 128^3
volumes, so it stops with status 3 and names the split that fits: `--spatial 2 would plan at
most 1.8 GiB per device`. `--spatial 2` cuts every sample along its depth into 2 slabs, each
on its own device, which exchange the planes at their edges; with 4 devices, 2 stages of 2
slabs. `tandem verify` (status 0) finds the gradients of the split equal to one device's on
whole samples and prints, per parameter, the devices its forward and backward ran on: here
both slabs' (`cpu:0,cpu:1`). tandem feeds the graph channels-first ([B,C,D,H,W], as it reads
NIfTI volumes) and takes over the two Transposes tf2onnx puts at its input and output. Your own
volumes: `--data nifti:DIR` (docs/data.md).

`load` reads tandem consolidate's state dict (keyed by the graph's initializer names, which are
TensorFlow's variable names), says how far the weights moved from the exported ones, and
writes them in the order Keras's get_weights gives them: per layer, [kernel, bias], the
Conv3D kernel [out,in,k,k,k] as [k,k,k,in,out], the Conv3DTranspose kernel [in,out,k,k,k] as
[k,k,k,out,in]. Into the Keras model that was converted:

    w = np.load("unet_keras.npz")
    for layer in model.layers:
        if layer.weights:
            layer.set_weights([w[f"{layer.name}:{i}"] for i in range(len(layer.weights))])

Without TensorFlow it checks what it can: a forward written in Keras's terms (NDHWC, the
kernels in Keras's order; NumPy) on `--sample` equals the graph's forward with the trained
weights (keras_unet3d.forward) and tandem predict's output, within 1e-5. `--small` is the same
model with filters 4, 8, 16, trained on 16^3 volumes.
"""
import argparse
import itertools
import os
import sys

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
import keras_unet3d  # noqa: E402  (examples/onnx: the graph tf2onnx writes)

# Shapes: B batch, D,H,W a volume, C channels; Keras's tensors are [B,D,H,W,C].


def filters_of(args):
    return (4, 8, 16) if args.small else tuple(int(f) for f in args.filters.split(","))


def keras_weights(state):
    """{Keras layer name: its get_weights()} from the state dict tandem consolidate writes,
    keyed by TensorFlow's variable names: model/<layer>/Conv3D/ReadVariableOp:0 (the kernel),
    model/<layer>/conv3d_transpose/ReadVariableOp:0 (the transposed one's), and
    model/<layer>/BiasAdd/ReadVariableOp:0 (the bias)."""
    layers = {}
    for name, tensor in state.items():
        _, layer, op, _ = name.split("/")
        kernel, bias = layers.setdefault(layer, [None, None])
        if op in ("Conv3D", "conv3d_transpose"):
            # [out,in,k,k,k] -> [k,k,k,in,out]; transposed: [in,out,k,k,k] -> [k,k,k,out,in]
            layers[layer][0] = tensor.permute(2, 3, 4, 1, 0).numpy()
        elif op == "BiasAdd":
            layers[layer][1] = tensor.numpy()
        else:
            raise SystemExit(f"{name}: not a Conv3D or Conv3DTranspose variable")
    return layers


def conv3d(x, kernel, bias):
    """Keras Conv3D, padding "same", stride 1: x [B,D,H,W,C], kernel [k,k,k,C,O]."""
    k = kernel.shape[0]
    lo, hi = (k - 1) // 2, k // 2
    x = np.pad(x, ((0, 0), (lo, hi), (lo, hi), (lo, hi), (0, 0)))
    windows = sliding_window_view(x, (k, k, k), axis=(1, 2, 3))  # [B,D,H,W,C,k,k,k]
    return np.einsum("bdhwcijl,ijlco->bdhwo", windows, kernel, optimize=True) + bias


def conv3d_transpose(x, kernel, bias):
    """Keras Conv3DTranspose, kernel 2, strides 2: x [B,D,H,W,C], kernel [2,2,2,O,C]."""
    b, d, h, w, _ = x.shape
    y = np.einsum("bdhwc,ijloc->bdihjwlo", x, kernel, optimize=True)
    return y.reshape(b, 2 * d, 2 * h, 2 * w, kernel.shape[3]) + bias


def keras_forward(weights, filters, x):
    """The Keras model (examples/onnx/keras_unet3d.py's docstring) on x [B,D,H,W,1], in float64,
    each layer taking its weights by the name Keras gives it (conv3d, conv3d_1, ...)."""
    convs = (f"conv3d{'' if i == 0 else f'_{i}'}" for i in itertools.count())
    ups = (f"conv3d_transpose{'' if i == 0 else f'_{i}'}" for i in itertools.count())

    def conv(x, activation=lambda v: np.maximum(v, 0)):
        return activation(conv3d(x, *[w.astype(np.float64) for w in weights[next(convs)]]))

    x, skips = x.astype(np.float64), []
    for _ in filters[:-1]:
        x = conv(conv(x))
        skips.append(x)
        b, d, h, w, c = x.shape
        x = x.reshape(b, d // 2, 2, h // 2, 2, w // 2, 2, c).max(axis=(2, 4, 6))
    x = conv(x)
    for skip in reversed(skips):
        x = conv3d_transpose(x, *[w.astype(np.float64) for w in weights[next(ups)]])
        x = conv(np.concatenate([x, skip], axis=-1))
    return conv(x, lambda v: 1 / (1 + np.exp(-v)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["export", "load"])
    p.add_argument("path", help="export: the .onnx to write; load: tandem consolidate's .pt")
    p.add_argument("--filters", default="32,64,128,256,512",
                   help="filters per level, the bottom's last (default 32,64,128,256,512)")
    p.add_argument("--small", action="store_true", help="filters 4,8,16 on 16^3 volumes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", help="export: write a fixed volume here [D,H,W] (24^3 with "
                                    "--small, else 32^3); load: the volume tandem predict was "
                                    "given")
    p.add_argument("--predicted", help="load: tandem predict's output for --sample")
    p.add_argument("--keras-weights", help="load: write the weights here for set_weights (.npz)")
    args = p.parse_args()
    filters = filters_of(args)
    model = keras_unet3d.graph(filters, args.seed)
    if args.action == "export":
        os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
        import onnx
        onnx.save(model, args.path)
        print(f"wrote {args.path}")
        if args.sample:
            # Any multiple of the graph's pooling (2^(levels-1)) that 2 slabs divide into
            # multiples of it: 24 = 2 x 12 for 3 levels, 32 = 2 x 16 for 5.
            side = 24 if args.small else 32
            gen = torch.Generator().manual_seed(args.seed + 2)
            np.save(args.sample, torch.randn(side, side, side, generator=gen).numpy())
            print(f"wrote {args.sample}")
        return
    initial = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    trained = torch.load(args.path)
    # As a strict load_state_dict: the same names, each of the same shape.
    if set(trained) != set(initial):
        raise SystemExit(f"{args.path} does not hold this graph's initializers: missing "
                         f"{sorted(set(initial) - set(trained))}, unexpected "
                         f"{sorted(set(trained) - set(initial))}")
    for name, array in initial.items():
        if tuple(trained[name].shape) != array.shape:
            raise SystemExit(f"{name}: {list(trained[name].shape)} in {args.path}, "
                             f"{list(array.shape)} in the graph")
    changes = [float(np.abs(trained[k].numpy() - initial[k]).max()) for k in initial]
    changed = sum(c > 0 for c in changes)
    print(f"loaded {args.path}: {len(trained)} tensors, {changed} moved from the exported "
          f"weights (largest change {max(changes):.3g})")
    if changed == 0:
        raise SystemExit(f"{args.path} holds the exported weights: no training step changed them")
    weights = keras_weights(trained)
    for layer, (kernel, bias) in weights.items():
        print(f"  {layer:20s} kernel {list(kernel.shape)}  bias {list(bias.shape)}")
    if args.keras_weights:
        np.savez(args.keras_weights, **{f"{layer}:{i}": w for layer, ws in weights.items()
                                        for i, w in enumerate(ws)})
        print(f"wrote {args.keras_weights}")
    if args.sample:
        x = np.load(args.sample)[None, ..., None]  # [D,H,W] -> [1,D,H,W,1], as Keras takes it
        mine = keras_forward(weights, filters, x)[0, ..., 0]
        for t in model.graph.initializer:
            t.CopyFrom(numpy_helper.from_array(trained[t.name].numpy(), t.name))
        with torch.no_grad():
            graph = keras_unet3d.forward(model, torch.from_numpy(x))[0, ..., 0].numpy()
        # Probabilities in [0, 1]; float32 sums in another order differ by a few 1e-7.
        checks = [("the graph's forward with the trained weights", graph)]
        if args.predicted:
            checks.append((args.predicted, np.load(args.predicted)))
        for what, theirs in checks:
            if theirs.shape != mine.shape:
                raise SystemExit(f"{what}: shape {list(theirs.shape)}, but the Keras forward "
                                 f"gives {list(mine.shape)}")
            diff = float(np.abs(mine - theirs).max())
            if diff > 1e-5:
                raise SystemExit(f"{what} differs from the Keras forward by {diff:.3g} "
                                 f"(allowed 1e-05)")
            print(f"the Keras forward on {args.sample} equals {what} (largest difference "
                  f"{diff:.3g})")


if __name__ == "__main__":
    main()
