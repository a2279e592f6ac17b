#!/usr/bin/env python3
"""PyTorch's own pipeline, torch.distributed.pipeline.sync.Pipe, on the models tandem benchmarks.

The same layers as tandem's `mlp` and `conv3d-stack` models, split into stages by the same rule
as tandem's partition_by_parameters, trained with Adam on synthetic data of the same shapes,
with the same thread budget. Pipe runs on CPU devices (Pipe puts every CPU partition on one
worker thread), chunks = micro-batches, checkpoint='never'. It needs torch.distributed.rpc
with one worker; the RPC agent listens on the loopback interface only.

Each measured run builds a fresh model, takes one warm-up step and times --steps steps; the
result is the median over --repeats runs. One line per configuration, key=value:

  partition model=mlp stages=2 balance=10,10
  pipe model=mlp stages=2 microbatches=4 threads=2 repeats=5 steps=10 samples_per_s=M min=A max=B
  plain model=mlp stages=1 microbatches=1 threads=2 ... (--plain: one module, no Pipe)

With --serve it measures one run per request instead, so that a benchmark program can time
it in turn with its own runs (bench/python_baseline.h). Requests on stdin, one reply line each
on stdout: "partition S" -> the balance ("10,10"); "plain" -> samples/s of one plain run;
"pipe S M" -> samples/s of one Pipe run with S stages and M micro-batches; "error ..." when a
request fails.

Usage: /usr/bin/python3 bench/pipe_baseline.py [--model mlp|conv3d-stack] [--stages 2,4]
         [--microbatches 1,2,4,8,16,32] [--plain] [--threads N] [--repeats 5] [--steps 10]
         [--serve]
"""
import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

# Layer shapes. mlp: input [B,1,28,28] -> flatten -> dense0 (784 -> width, relu) ->
# blocks x 2 dense (width -> width, relu) -> dropout -> logits (width -> 10); cross-entropy.
# conv3d-stack: [B,1,S,S,S] -> (convs-1) x Conv3d(filters, 3^3, same, relu) -> Conv3d(1);
# MSE against a [B,1,S,S,S] target.


def linear(inputs, outputs, relu):
    lin = nn.Linear(inputs, outputs)
    if relu:  # as tandem: He initialization, zero bias for layers followed by relu
        nn.init.kaiming_normal_(lin.weight, a=0.0, mode="fan_in", nonlinearity="relu")
        nn.init.zeros_(lin.bias)
        return nn.Sequential(lin, nn.ReLU())
    return lin


def mlp_layers(width, blocks):
    """One entry per tandem layer, in tandem's order (flatten, dense0, blocks, dropout, logits)."""
    layers = [nn.Flatten(), linear(784, width, True)]
    layers += [linear(width, width, True) for _ in range(2 * blocks)]
    layers += [nn.Dropout(0.0), linear(width, 10, False)]
    return layers


def conv3d_layers(convs, filters):
    layers = []
    for i in range(convs):
        last = i == convs - 1
        conv = nn.Conv3d(1 if i == 0 else filters, 1 if last else filters, 3, padding=1)
        layers.append(conv if last else nn.Sequential(conv, nn.ReLU()))
    return layers


def partition_by_parameters(layers, stages):
    """tandem's partition_by_parameters: minimize the largest stage's weight, where a layer's
    weight is its parameter count plus one; the same dynamic program and tie-breaking."""
    n = len(layers)
    prefix = [0.0]
    for layer in layers:
        prefix.append(prefix[-1] + 1 + sum(p.numel() for p in layer.parameters()))
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n - (stages - k) + 1):
            for j in range(k - 1, i):
                if best[k - 1][j] == inf:
                    continue
                v = max(best[k - 1][j], prefix[i] - prefix[j])
                if v < best[k][i]:
                    best[k][i] = v
                    cut[k][i] = j
    balance = [0] * stages
    i = n
    for k in range(stages, 0, -1):
        j = cut[k][i]
        balance[k - 1] = i - j
        i = j
    return balance


class Workload:
    def __init__(self, args):
        self.args = args
        self.model = args.model
        torch.manual_seed(1)
        if self.model == "mlp":
            self.batch = args.batch or 256
            self.x = torch.randn(self.batch, 1, 28, 28)
            self.y = torch.randint(10, (self.batch,))
            self.loss = nn.functional.cross_entropy
        else:
            self.batch = args.batch or 8
            s = args.volume
            self.x = torch.randn(self.batch, 1, s, s, s)
            self.y = torch.randn(self.batch, 1, s, s, s)
            self.loss = nn.functional.mse_loss

    def layers(self):
        torch.manual_seed(0)
        if self.model == "mlp":
            return mlp_layers(self.args.width, self.args.blocks)
        return conv3d_layers(self.args.convs, self.args.filters)


def timed_steps(step, steps):
    step()  # warm-up: first-touch allocations, thread pools
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


def plain_run(w, steps):
    model = nn.Sequential(*w.layers())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=False)  # as LibTorch 1.13's zero_grad: zero in place
        w.loss(model(w.x), w.y).backward()
        opt.step()

    return w.batch * steps / timed_steps(step, steps)


def pipe_run(w, balance, chunks, steps):
    from torch.distributed.pipeline.sync import Pipe

    layers = w.layers()
    stages, begin = [], 0
    for b in balance:
        stages.append(nn.Sequential(*layers[begin:begin + b]))
        begin += b
    model = Pipe(nn.Sequential(*stages), chunks=chunks, checkpoint="never")
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=False)
        out = model(w.x).local_value()
        w.loss(out, w.y).backward()
        opt.step()

    return w.batch * steps / timed_steps(step, steps)


def report(kind, w, stages, microbatches, args, values):
    values = sorted(values)
    print(f"{kind} model={w.model} stages={stages} microbatches={microbatches} threads={args.threads} "
          f"repeats={len(values)} steps={args.steps} samples_per_s={statistics.median(values):.1f} "
          f"min={values[0]:.1f} max={values[-1]:.1f}", flush=True)


def set_blas_threads(n):
    """OpenBLAS's pool is process-wide and separate from torch's OpenMP pool; give it the same
    budget that tandem gives it (the pthread OpenBLAS ignores torch.set_num_threads)."""
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            ctypes.CDLL(name).openblas_set_num_threads(n)
            return True
        except (OSError, AttributeError):
            continue
    return False


def int_list(text):
    return [int(v) for v in text.split(",") if v]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "conv3d-stack"], default="mlp")
    p.add_argument("--stages", type=int_list, default=[2, 4], help="stage counts, e.g. 2,4")
    p.add_argument("--microbatches", type=int_list, default=[1, 2, 4, 8, 16, 32])
    p.add_argument("--plain", action="store_true", help="also time a plain loop over one module")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="intra-op threads of the process (default: the cores available)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=0, help="default 256 (mlp), 8 (conv3d-stack)")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--convs", type=int, default=4)
    p.add_argument("--filters", type=int, default=16)
    p.add_argument("--volume", type=int, default=32)
    p.add_argument("--serve", action="store_true",
                   help="answer one request per stdin line (see the module docstring)")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    if not set_blas_threads(args.threads):
        print("pipe_baseline: the loaded BLAS has no openblas_set_num_threads; its pool keeps "
              "its own size", file=sys.stderr)
    w = Workload(args)

    if args.serve:
        with Rpc():
            serve(w, args)
        return
    if args.plain:
        report("plain", w, 1, 1, args, [plain_run(w, args.steps) for _ in range(args.repeats)])
    if not args.stages:
        return
    with Rpc():
        for stages in args.stages:
            balance = partition_by_parameters(w.layers(), stages)
            print(f"partition model={w.model} stages={stages} balance={','.join(map(str, balance))}",
                  flush=True)
            for m in args.microbatches:
                if m > w.batch:
                    continue
                report("pipe", w, stages, m, args,
                       [pipe_run(w, balance, m, args.steps) for _ in range(args.repeats)])


class Rpc:
    """torch.distributed.rpc with this process as its only worker, as Pipe requires; the
    agent listens on the loopback interface only."""

    def __enter__(self):
        import torch.distributed.rpc as rpc

        os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
        self.store = tempfile.NamedTemporaryFile(prefix="pipe_baseline.", delete=False)
        self.store.close()
        rpc.init_rpc("worker", rank=0, world_size=1,
                     rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                         init_method="file://" + self.store.name))
        return self

    def __exit__(self, *exc):
        import torch.distributed.rpc as rpc

        rpc.shutdown()
        os.unlink(self.store.name)
        return False


def serve(w, args):
    """One reply line per request line, until stdin closes (protocol: the module docstring)."""
    for line in sys.stdin:
        words = line.split()
        try:
            if words[:1] == ["partition"] and len(words) == 2:
                reply = ",".join(map(str, partition_by_parameters(w.layers(), int(words[1]))))
            elif words == ["plain"]:
                reply = f"{plain_run(w, args.steps):.3f}"
            elif words[:1] == ["pipe"] and len(words) == 3:
                stages, m = int(words[1]), int(words[2])
                balance = partition_by_parameters(w.layers(), stages)
                reply = f"{pipe_run(w, balance, m, args.steps):.3f}"
            else:
                reply = f"error: unknown request {line.strip()!r}"
        except Exception as e:  # the reply names the failure; the client decides
            reply = f"error: {type(e).__name__}: {e}".replace("\n", " ")
        print(reply, flush=True)


if __name__ == "__main__":
    main()
