"""An MNIST MLP of blocks, trained in pipeline stages on MPI ranks with micro-batches, Adam and
dropout: what a hand-written MPI pipeline does, from one PyTorch module and one command.

The model: an input block (flatten, Linear 784 -> width, ReLU, Dropout), hidden blocks (Linear
width -> width, ReLU, Dropout) and a head (Linear width -> 10, the logits).

    python3 examples/seeds/mnist_mlp.py export mlp.onnx --sample images.npy
    mpirun -n 4 build/tandem verify --model mlp.onnx --data mnist --batch 64 --microbatches 8 \\
        --balance 4,3,3,1
    mpirun -n 4 build/tandem train --model mlp.onnx --data mnist --batch 64 --microbatches 8 \\
        --balance 4,3,3,1 --schedule 1f1b --optimizer adam --lr 1e-3 --epochs 2 \\
        --save-dir runs/mlp
    build/tandem consolidate runs/mlp -o trained.pt
    build/tandem predict --model mlp.onnx --checkpoint runs/mlp --input images.npy \\
        --output probabilities.npy --standardize none
    python3 examples/seeds/mnist_mlp.py load trained.pt --sample images.npy \\
        --predicted probabilities.npy

Under `mpirun -n 4` each rank runs one stage. Every node of the graph is a layer: `--balance
4,3,3,1` puts the input block (Flatten, Gemm, Relu, Dropout) on rank 0, one hidden block on
each of ranks 1 and 2 and the head on rank 3, as the hand-written pipeline did (without it the
stages get even parameter counts). Each batch of 64 is cut into 8 micro-batches that flow
through the stages under the schedule (`build/tandem schedule --schedule 1f1b --stages 4
--microbatches 8` prints its grid); each stage steps its own Adam. Without mpirun, `--devices
4` runs the same 4 stages in one process, to the same bits (the same `weights=` fingerprint);
`--balance 4,7 --replicas 2` runs 2 stages x 2 replicas on the 4 ranks. The dropout masks
follow the samples, not the split, so `tandem verify` (status 0) finds the gradients of the
split equal to one device's on the whole batch, dropout included. `--data mnist` reads
data/mnist (make demo fetches it). With `--steps 300` for `--epochs 2`: `test_accuracy=0.9434`.

`load` puts the weights tandem trained into the PyTorch module (a strict load_state_dict: the
ONNX initializers keep the state-dict names), says how far they moved from the exported ones,
and, given `--sample` and tandem predict's output for it, checks that the module's softmax on
those images (in evaluation mode: no dropout) gives the same probabilities. `--sample` holds
MNIST's first 16 test images as `--data mnist` feeds them (standardized already: hence
`--standardize none`). `--small` is the same model with a width of 32.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn

# Shapes: B batch; an image is [1,28,28]; the logits are [B,10].


def block(cin, cout, dropout):
    return nn.Sequential(nn.Linear(cin, cout), nn.ReLU(), nn.Dropout(dropout))


class MnistMlp(nn.Module):
    def __init__(self, width=512, blocks=2, dropout=0.2):
        super().__init__()
        self.input = block(28 * 28, width, dropout)
        self.blocks = nn.Sequential(*(block(width, width, dropout) for _ in range(blocks)))
        self.head = nn.Linear(width, 10)

    def forward(self, x):  # [B,1,28,28] -> [B,10] logits
        x = self.input(torch.flatten(x, 1))  # flatten, not x.view(x.size(0), -1)
        return self.head(self.blocks(x))


def build(args):
    width, blocks = (32, 2) if args.small else (args.width, args.blocks)
    torch.manual_seed(args.seed)  # the seed's weights: export and load build the same module
    return MnistMlp(width, blocks, args.dropout)


def export(model, path):
    """For training: the initializers keep the state-dict names (`blocks.0.0.weight`), and the
    Dropout nodes stay in the graph (tandem draws their masks while training)."""
    torch.onnx.export(model, torch.randn(2, 1, 28, 28), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def mnist_sample(folder, n=16):
    """The first n test images of MNIST's IDX files in folder, as --data mnist feeds them:
    divided by 255, standardized with the training images' mean and deviation; float32
    [n,1,28,28], and their labels [n]."""
    def idx(name, offset):
        with open(os.path.join(folder, name), "rb") as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    train = idx("train-images-idx3-ubyte", 16) / 255.0
    test = idx("t10k-images-idx3-ubyte", 16)[:n * 28 * 28].reshape(n, 1, 28, 28) / 255.0
    images = (test - train.mean()) / train.std(ddof=1)
    return images.astype(np.float32), idx("t10k-labels-idx1-ubyte", 8)[:n]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["export", "load"])
    p.add_argument("path", help="export: the .onnx to write; load: tandem consolidate's .pt")
    p.add_argument("--width", type=int, default=512, help="units of each block (default 512)")
    p.add_argument("--blocks", type=int, default=2, help="hidden blocks (default 2)")
    p.add_argument("--dropout", type=float, default=0.2, help="each block's (default 0.2)")
    p.add_argument("--small", action="store_true", help="a width of 32, 2 hidden blocks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", help="export: write MNIST's first 16 test images here "
                                    "[16,1,28,28]; load: the images tandem predict was given")
    p.add_argument("--mnist", default="data/mnist", help="export: MNIST's IDX files "
                                                         "(default data/mnist)")
    p.add_argument("--predicted", help="load: tandem predict's probabilities for --sample")
    args = p.parse_args()
    model = build(args)
    if args.action == "export":
        os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
        export(model, args.path)
        print(f"wrote {args.path}")
        if args.sample:
            images, labels = mnist_sample(args.mnist)
            np.save(args.sample, images)
            print(f"wrote {args.sample}: test images of the classes {labels.tolist()}")
        return
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    trained = torch.load(args.path)
    model.load_state_dict(trained)  # strict: every name and shape must match
    changes = [(trained[k] - initial[k]).abs().max().item() for k in initial]
    changed = sum(c > 0 for c in changes)
    print(f"loaded {args.path} into MnistMlp: {len(trained)} tensors, {changed} moved from the "
          f"exported weights (largest change {max(changes):.3g})")
    if changed == 0:
        raise SystemExit(f"{args.path} holds the exported weights: no training step changed them")
    if args.sample and args.predicted:
        model.eval()  # no dropout, as tandem predict
        with torch.no_grad():
            mine = torch.softmax(model(torch.from_numpy(np.load(args.sample))), 1).numpy()
        theirs = np.load(args.predicted)
        if mine.shape != theirs.shape:
            raise SystemExit(f"{args.predicted}: shape {list(theirs.shape)}, but the module "
                             f"gives {list(mine.shape)}")
        # Probabilities in [0, 1]: float32 sums in another order differ by a few 1e-7.
        diff = float(np.abs(mine - theirs).max())
        if diff > 1e-5:
            raise SystemExit(f"{args.predicted} differs from the module's softmax by {diff:.3g} "
                             f"(allowed 1e-05)")
        print(f"the module's softmax on {args.sample} equals {args.predicted} (largest "
              f"difference {diff:.3g}; the classes {mine.argmax(1).tolist()})")


if __name__ == "__main__":
    main()
