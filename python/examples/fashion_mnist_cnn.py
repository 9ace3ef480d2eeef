"""A small CNN on Fashion-MNIST, trained by the parameter servers through ps.torch.

What it is: a plain PyTorch training script (a model, a data loop, an
optimizer) in which the optimizer is ps.torch.DistributedOptimizer, so the
servers' SGD (ps_server --lr) makes every update, in sync or async mode as
the servers run. Something the built-in ps_worker (an MLP) cannot train.

Model: two conv(3x3, padding 1)-ReLU-maxpool(2) blocks (1->16->32 channels,
28x28 -> 7x7) and one linear layer (32*7*7 -> 10), 20,490 parameters.

Data: the IDX files (gzip) of --data_dir, parsed with numpy. Each worker
trains on its own disjoint share of the 60,000 training images, the rows
i with i % W == PS_WORKER_ID, reshuffled every epoch (seeded by --seed,
the worker and the epoch). Every worker takes the same number of steps per
epoch (floor(60000 / W / batch_size)), as a sync barrier needs.

Output: one line per epoch per worker; worker 0 evaluates on the 10,000
test images after every epoch and, at the end, after waiting for every
worker's last update, prints a machine-readable last line:
    test_accuracy=0.8871
(--eval_all: every worker evaluates and prints it.) Exit status 0 on success.

Launch (the environment PS_SERVERS, PS_WORKER_ID, PS_NUM_WORKERS and
PS_TLS_DIR is set by the launcher, read by ps.torch.connect_from_env()):
    bazel build //python:ps //server:ps_server
    deploy/local_cluster.sh --mode=sync --lr=0.2 --workers=2 \\
      --worker_cmd='/usr/bin/python3 python/examples/fashion_mnist_cnn.py --epochs=2'
(async: --mode=async --lr=0.1). Measured accuracies: docs/python.md.
"""

import argparse
import gzip
import os
import sys
import time
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

import ps
import ps.torch

# The training set's mean and standard deviation (pixels scaled to [0, 1]).
MEAN, STD = 0.2860, 0.3530


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Train a small CNN on Fashion-MNIST with the parameter servers "
        "(ps.torch.DistributedOptimizer). Run it as every worker of "
        "deploy/local_cluster.sh --worker_cmd=...; the learning rate is the servers' "
        "(ps_server --lr, local_cluster.sh --lr).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=2, help="passes over this worker's share")
    p.add_argument("--batch_size", type=int, default=64, help="examples per step per worker")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist",
                   help="folder with the four *-ubyte.gz IDX files")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the initial weights (worker 0's are used) and the data order")
    p.add_argument("--max_steps", type=int, default=0,
                   help="stop after this many steps in all; 0: no limit")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1 suits several workers on one machine)")
    p.add_argument("--eval_all", action="store_true",
                   help="every worker evaluates and prints test_accuracy, not only worker 0")
    p.add_argument("--connect_timeout", type=float, default=60.0,
                   help="seconds to wait for the servers to come up")
    p.add_argument("--retry_timeout", type=float, default=60.0,
                   help="seconds a call keeps retrying while a server restarts")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.max_steps < 0:
        p.error(f"--max_steps must be 0 or more, got {args.max_steps}")
    return args


# ---------------------------------------------------------------------------
# Data: IDX files (big-endian header: magic 0x0000 08 <ndim>, then ndim
# uint32 sizes, then uint8 data).

def read_idx(path: str) -> npt.NDArray[np.uint8]:
    """The uint8 array in a gzip IDX file."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    ndim = data[3]
    dims = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, offset=4))
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data for dimensions {dims}")
    return body.reshape(dims)


def load(data_dir: str, split: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """(images float32 [N,1,28,28] standardized, labels int64 [N]) of "train" or "t10k"."""
    x = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{data_dir}: {x.shape[0]} {split} images but {y.shape[0]} labels")
    pixels = (x.astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(pixels).unsqueeze(1), torch.from_numpy(y.astype(np.int64))


# ---------------------------------------------------------------------------
# Model.

class Net(torch.nn.Module):
    """conv-ReLU-pool, conv-ReLU-pool, linear: 1x28x28 -> 10 logits."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        logits: torch.Tensor = self.fc(x.flatten(1))
        return logits


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
             batch: int = 1000) -> Tuple[float, float]:
    """(accuracy, mean cross-entropy) on (x, y)."""
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(y), batch):
        out = model(x[i:i + batch])
        loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
        correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / len(y), loss / len(y)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)  # every worker builds the same model; worker 0's values win

    client = ps.torch.connect_from_env(connect_timeout=args.connect_timeout,
                                       retry_timeout=args.retry_timeout)
    worker, workers = client.worker_id, client.num_workers

    x_train, y_train = load(args.data_dir, "train")
    x_test, y_test = load(args.data_dir, "t10k")
    share = len(y_train) // workers  # the same for every worker
    x_mine, y_mine = x_train[worker::workers][:share], y_train[worker::workers][:share]
    steps_per_epoch = share // args.batch_size
    if steps_per_epoch == 0:
        sys.exit(f"--batch_size={args.batch_size} is more than this worker's {share} examples")

    model = Net()
    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
    total = args.epochs * steps_per_epoch
    if args.max_steps:
        total = min(total, args.max_steps)
    evaluates = worker == 0 or args.eval_all
    n_params = sum(p.numel() for p in model.parameters())
    print(f"worker {worker}/{workers}: cnn ({n_params} parameters), {client.mode}, "
          f"{steps_per_epoch} steps/epoch, {total} steps, batch {args.batch_size}, "
          f"{len(y_mine)} training examples of {len(y_train)}", flush=True)

    t0 = time.monotonic()
    step = 0
    gen = torch.Generator().manual_seed(args.seed * 1000 + worker)
    for epoch in range(args.epochs):
        if step >= total:
            break
        order = torch.randperm(len(y_mine), generator=gen)
        loss_sum, n = 0.0, 0
        for i in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_mine[idx]), y_mine[idx])
            loss.backward()
            opt.step()
            loss_sum, n, step = loss_sum + loss.item(), n + 1, step + 1
        line = (f"worker {worker}: epoch {epoch + 1}/{args.epochs}: steps {step}, "
                f"train_loss {loss_sum / max(n, 1):.4f}, version {client.version}")
        if evaluates:
            acc, test_loss = evaluate(model, x_test, y_test)
            line += f", test_accuracy {acc:.4f}, test_loss {test_loss:.4f}"
        print(line + f", {time.monotonic() - t0:.1f} s", flush=True)

    if evaluates:
        # The final model: in sync, the last step's weights (every worker has
        # them); in async, wait until the servers applied every worker's
        # pushes (W x steps versions), as ps_worker's worker 0 does.
        final = total if client.mode == "sync" else workers * total
        try:
            weights = client.pull(min_version=final)
        except ps.DeadlineExceeded:
            print(f"worker {worker}: the servers did not reach version {final}; "
                  "evaluating the weights as they are", flush=True)
            weights = client.pull()
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(torch.from_numpy(weights[name]))
        acc, test_loss = evaluate(model, x_test, y_test)
        print(f"worker {worker} done: {client.mode}, steps {step}, version {client.version}, "
              f"test_loss {test_loss:.4f}, {time.monotonic() - t0:.1f} s", flush=True)
        print(f"test_accuracy={acc:.4f}", flush=True)
    else:
        print(f"worker {worker} done: {client.mode}, steps {step}, version {client.version}, "
              f"{time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
