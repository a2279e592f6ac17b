#!/usr/bin/env python3
"""How fast this machine's cores run several one-thread processes at once, by the kind of work,
against one process alone: the products of 384 x 384 that the planner's efficiency probe runs
(measured_core_efficiency), and an mlp's dense-layer work (per layer of 1024 x 1024: the
forward, the input gradient and the weight-gradient sum on 32 rows) over 1 and 4 layers. Each
kind runs in 1 process, then in N at once (N = the cores, then twice the cores); the efficiency
is (time alone x N / cores) over the slowest of the N, per round: 1 when the cores share the
work perfectly. Prints the median of 5 rounds and every round.

usage: /usr/bin/python3 bench/cores_by_kind.py
"""

import multiprocessing as mp
import os
import statistics
import time

import torch


def products():
    a, c = torch.randn(384, 384), torch.randn(384, 384)
    torch.mm(a, c)
    start = time.perf_counter()
    for _ in range(40):
        c = torch.mm(a, c.clamp(-1, 1))
    return time.perf_counter() - start


def dense(layers):
    def work():
        weights = [torch.randn(1024, 1024) for _ in range(layers)]
        grads = [torch.zeros(1024, 1024) for _ in range(layers)]
        x, dy = torch.randn(32, 1024), torch.randn(32, 1024)

        def one_pass():
            for w, g in zip(weights, grads):
                torch.mm(x, w.t())  # forward
                torch.mm(dy, w)  # input gradient
                g.addmm_(x.t(), dy)  # weight-gradient sum

        one_pass()
        start = time.perf_counter()
        for _ in range(120 // layers):
            one_pass()
        return time.perf_counter() - start

    return work


def timed(kind, out):
    torch.set_num_threads(1)
    out.put(kind())


def slowest(kind, n):
    out = mp.Queue()
    ps = [mp.Process(target=timed, args=(kind, out)) for _ in range(n)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    return max(out.get() for _ in range(n))


if __name__ == "__main__":
    cores = len(os.sched_getaffinity(0))
    kinds = (("products 384 x 384", products),
             ("dense 1 layer of 1024 x 1024", dense(1)),
             ("dense 4 layers of 1024 x 1024", dense(4)))
    for name, kind in kinds:
        for n in (cores, 2 * cores):
            rounds = []
            for _ in range(5):
                alone = slowest(kind, 1)
                rounds.append(alone * n / cores / slowest(kind, n))
            each = ", ".join(f"{r:.2f}" for r in rounds)
            print(f"{name}, {n} processes on {cores} cores: efficiency "
                  f"{statistics.median(rounds):.2f} (rounds: {each})")
