"""A worker of //python:local_cluster_test: least squares on synthetic data
with ps.connect_from_env(), each worker on its own half of the rows.

Prints "worker W: loss L0 -> L1, checksum C" at the end, where C is the
weights' bytes hashed: in sync mode every worker ends with the same weights.
"""

import hashlib
import sys
from collections import OrderedDict

import numpy as np

import ps

STEPS = 30
client = ps.connect_from_env(connect_timeout=30)
w_id, W = client._worker_id, client.num_workers

rng = np.random.default_rng(1234)  # the same data on every worker
x = rng.standard_normal((256, 8)).astype(np.float32)
y = (x @ np.arange(1, 9, dtype=np.float32)).astype(np.float32)
xs, ys = x[w_id::W], y[w_id::W]


def loss_and_grad(w):
    err = xs @ w["w"] - ys
    return float(np.mean(err * err)), OrderedDict(
        w=(2.0 / len(ys) * xs.T @ err).astype(np.float32))


client.init(OrderedDict(w=np.zeros(8, np.float32)))
weights = client.pull()
first, _ = loss_and_grad(weights)
for _ in range(STEPS):
    _, grad = loss_and_grad(weights)
    weights = client.push_pull(grad)
last, _ = loss_and_grad(weights)
digest = hashlib.sha256(weights["w"].tobytes()).hexdigest()[:16]
print(f"worker {w_id}: {client.mode}, version {client.version}, loss {first:.4f} -> {last:.4f}, "
      f"checksum {digest}", flush=True)
sys.exit(0 if last < first / 10 else 1)
