#!/usr/bin/python3
"""python_worker: the default Python worker of deploy/docker-compose.python.yml
(baked into the `python` image at /usr/local/share/ps/python_worker.py).

    python3 python_worker.py [--epochs=N] [--batch=B] [--hidden=H] [--threads=T]

A plain PyTorch training script put on the parameter servers with ps.torch:
a 784-H-10 MLP on Fashion-MNIST (the IDX files of Debian's
dataset-fashion-mnist), each worker on its own share of the training set
(rows worker_id, worker_id + W, ...). The servers make the update
(ps_server --lr). Every worker takes the same number of steps, so sync mode
never waits for a worker that has finished.

The cluster comes from the environment (ps.torch.connect_from_env):
PS_SERVERS, PS_WORKER_ID, PS_NUM_WORKERS and PS_TLS_DIR, which the compose
override and deploy/local_cluster.sh --worker_cmd set.

At the end it evaluates on the test set and prints one line,
    python worker W: mode M, steps S, version V, test_accuracy A
and exits 0 (non-zero with a ps.Error if the cluster fails it).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch

import ps.torch

DATA = "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    """An IDX file's payload as uint8 (offset: the header's length)."""
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def images(name):
    return torch.from_numpy(idx(name, 16).reshape(-1, 784).astype(np.float32) / 255.0)


def labels(name):
    return torch.from_numpy(idx(name, 8).astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=float, default=1.0, help="passes over this worker's share")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="torch's threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    client = ps.torch.connect_from_env(connect_timeout=60, retry_timeout=60)
    w, n = client._worker_id, client.num_workers
    x, y = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    x, y = x[w::n], y[w::n]
    # The same count on every worker: the smallest share's.
    steps = int(args.epochs * (len(labels("train-labels-idx1-ubyte.gz")) // n) // args.batch)

    torch.manual_seed(0)  # worker 0's initial weights win anyway
    model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10))
    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
    t0 = time.monotonic()
    for step in range(steps):
        lo = (step * args.batch) % (len(y) - args.batch + 1)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[lo:lo + args.batch]),
                                          y[lo:lo + args.batch]).backward()
        opt.step()
    took = time.monotonic() - t0

    with torch.no_grad():
        tx, ty = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
        acc = (model(tx).argmax(1) == ty).float().mean().item()
    print(f"python worker {w}: mode {client.mode}, steps {steps}, version {client.version}, "
          f"samples/s {steps * args.batch / max(took, 1e-9):.0f}, test_accuracy {acc:.4f}",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
