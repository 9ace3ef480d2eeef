#!/usr/bin/python3
"""bench_worker.py: one worker process of python/bench.py.

Started by bench.py, never by hand. It trains the 784-512-256-10 ReLU MLP
on Fashion-MNIST (the IDX files read with numpy, normalized as
worker/mlp/dataset.cc does) with batch --batch_size, either as a parameter-server
worker (--role=ps_worker: ps.Client to --servers and
ps.torch.DistributedOptimizer) or as one rank of 2-process PyTorch DDP
(--role=ddp_worker: gloo over tcp://127.0.0.1:--port, torch.optim.SGD).
Every worker takes its own batch of each step: one permutation of the
training set per epoch, worker w taking batch (t * 2 + w) of it at step t.

It uses --threads math threads (torch.set_num_threads, one interop thread);
the driver also sets OMP/OPENBLAS/MKL_NUM_THREADS, which Debian's torch needs
for its OpenBLAS.

Protocol on stdout (the driver reads it): `ready ...` once set up, then
`progress STEP MONOTONIC_SECONDS loss L fwd_bwd_s F step_s S` every 10 steps
(and at step --warmup and at the last step), where F and S add up the loop's
forward + backward and optimizer-step seconds after the warm-up; `done` at
the end. With --steps=0 it trains until killed; else warmup + steps steps.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import os
import sys
import time
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:  # imported where used: the driver imports none of them
    import numpy as np
    import numpy.typing as npt
    import torch

WORKERS = 2
REPORT_EVERY = 10  # steps between progress lines
MEAN, STD = 0.2860, 0.3530  # worker/mlp/dataset.cc's normalization


def load_fashion_mnist(folder: str) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The training set as (float32 [n, 784] normalized, int64 [n]) numpy arrays."""
    import numpy as np

    def read(name: str) -> bytes:
        path = os.path.join(folder, name)
        if os.path.exists(path + ".gz"):
            with gzip.open(path + ".gz", "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()

    img = read("train-images-idx3-ubyte")
    lab = read("train-labels-idx1-ubyte")
    magic, n, rows, cols = np.frombuffer(img, ">u4", 4, 0)
    if magic != 0x803 or len(img) != 16 + n * rows * cols:
        raise ValueError(f"{folder}: train-images-idx3-ubyte is not an IDX3 image file")
    if np.frombuffer(lab, ">u4", 2, 0).tolist() != [0x801, n] or len(lab) != 8 + n:
        raise ValueError(f"{folder}: train-labels-idx1-ubyte does not match the images")
    pixels = np.frombuffer(img, np.uint8, n * rows * cols, 16).reshape(n, rows * cols)
    x = ((pixels.astype(np.float32) / 255.0 - MEAN) / STD).astype(np.float32, copy=False)
    y = np.frombuffer(lab, np.uint8, n, 8).astype(np.int64)
    return x, y


def make_mlp() -> torch.nn.Sequential:
    import torch
    nn = torch.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def run_worker(a: argparse.Namespace) -> None:
    """One worker process: trains and prints `progress STEP SECONDS` lines."""
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    x_np, y_np = load_fashion_mnist(a.dataset_dir)
    x_all, y_all = torch.from_numpy(x_np), torch.from_numpy(y_np)
    model = make_mlp()
    loss_fn = torch.nn.CrossEntropyLoss()

    opt: torch.optim.Optimizer
    net: torch.nn.Module
    if a.role == "ps_worker":
        import ps.torch
        client = ps.Client(a.servers, a.worker_id, WORKERS)
        opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
        net = model
    else:  # ddp_worker
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=a.worker_id, world_size=WORKERS,
                                init_method=f"tcp://127.0.0.1:{a.port}",
                                timeout=datetime.timedelta(seconds=120))
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(net.parameters(), lr=a.lr)

    # The same data order as every worker: one permutation per epoch, worker
    # w taking batch (t * W + w) of it at step t.
    n = x_np.shape[0]
    per_epoch = n // (a.batch_size * WORKERS)
    total = a.warmup + a.steps if a.steps > 0 else None
    rng = np.random.default_rng(a.seed)
    perm: Optional[torch.Tensor] = None
    compute_s = step_s = 0.0
    print(f"ready {a.role} {a.worker_id} threads {torch.get_num_threads()}", flush=True)
    step = 0
    while total is None or step < total:
        t = step % per_epoch
        if t == 0:
            perm = torch.from_numpy(rng.permutation(n))
        assert perm is not None  # step 0 made it
        first = (t * WORKERS + a.worker_id) * a.batch_size
        idx = perm[first:first + a.batch_size]
        xb, yb = x_all.index_select(0, idx), y_all.index_select(0, idx)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(net(xb), yb)
        loss.backward()  # DDP: includes its all-reduce
        t1 = time.perf_counter()
        opt.step()  # ps: the push-pull and loading the new weights
        t2 = time.perf_counter()
        step += 1
        if step > a.warmup:
            compute_s += t1 - t0
            step_s += t2 - t1
        if step % REPORT_EVERY == 0 or step == a.warmup or step == total:
            print(f"progress {step} {time.monotonic():.6f} loss {loss.item():.4f} "
                  f"fwd_bwd_s {compute_s:.4f} step_s {step_s:.4f}", flush=True)
    if a.role == "ddp_worker":
        import torch.distributed as dist
        dist.destroy_process_group()
    print("done", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description="One worker of python/bench.py (started by it).")
    p.add_argument("--role", choices=("ps_worker", "ddp_worker"), required=True)
    p.add_argument("--worker_id", type=int, required=True, choices=range(WORKERS))
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--steps", type=int, default=0, help="0: until killed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1, help="DDP's SGD")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dataset_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--servers", default="", help="ps_worker: HOST:PORT of the ps_server")
    p.add_argument("--port", type=int, default=0, help="ddp_worker: rank 0's port")
    run_worker(p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
