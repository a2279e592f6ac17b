#!/usr/bin/env python3
"""How much 2 busy cores slow each other, by the kind of work: products of 384 x 384 (what the
planner's efficiency probe runs, measured_core_efficiency) against the sums of a 32-row product
into a 1024 x 1024 gradient (addmm_, as an mlp's backward adds its weight gradients). Each kind
runs alone, then in 2 processes at once (one thread each); the efficiency is the time alone over
the slower of the two, per round. Prints the median of 7 rounds and every round.

usage: /usr/bin/python3 bench/cores_by_kind.py
"""

import multiprocessing as mp
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


def gradient_sums():
    g = torch.zeros(1024, 1024)
    x, y = torch.randn(32, 1024), torch.randn(32, 1024)
    g.addmm_(x.t(), y)
    start = time.perf_counter()
    for _ in range(60):
        g.addmm_(x.t(), y)
    return time.perf_counter() - start


def timed(kind, out):
    torch.set_num_threads(1)
    out.put(kind())


def once(kind):
    out = mp.Queue()
    p = mp.Process(target=timed, args=(kind, out))
    p.start()
    p.join()
    return out.get()


def together(kind):
    out = mp.Queue()
    ps = [mp.Process(target=timed, args=(kind, out)) for _ in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    return max(out.get(), out.get())


if __name__ == "__main__":
    for name, kind in (("products 384 x 384", products), ("gradient sums 1024 x 1024", gradient_sums)):
        rounds = [once(kind) / together(kind) for _ in range(7)]
        print(f"{name}: efficiency {statistics.median(rounds):.2f} (rounds: "
              + ", ".join(f"{r:.2f}" for r in rounds) + ")")
