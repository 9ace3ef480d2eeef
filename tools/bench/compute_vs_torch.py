#!/usr/bin/python3
"""compute_vs_torch.py: our CPU compute against Debian's PyTorch, side by side.

For each thread count it times, in turns on the same
machine, one training step of the same MLP (784-512-256-10 by default) at
the same batch (64) on the CPU:

  ours   compute_bench --device=cpu --threads=T --json: UseWeights (no copy
         on the CPU), forward, backward and the gradients into the host's
         buffers (the update is the servers' job), as the trainer's compute
         time counts it.
  torch  python3-torch: zero_grad (set_to_none), forward, cross-entropy,
         backward and torch.optim.SGD.step() (the update reads and writes
         each weight once; a single-process step needs it). With
         T > 1 it is timed twice, with torch.set_num_threads(T) and with
         torch.set_num_threads(1) (its matrix products still on T OpenBLAS
         threads), and the faster counts: on Debian's build the first runs
         torch's threads and OpenBLAS's on the same cores, and was 4x slower.

Every process gets OMP/OPENBLAS/MKL_NUM_THREADS=T (Debian's torch does its
matrix products in the system OpenBLAS, which torch.set_num_threads does not
reach) and glibc malloc settings that keep freed memory
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_: what
ps.torch.keep_freed_memory() sets), so that neither pays page faults for its
per-step tensors. --repeat N alternates the two N times per thread count and
reports medians, which spreads a shared machine's changing load.

Prints one row per thread count: ms per step of each, the ratio torch/ours
(above 1: ours is faster) and ours' step over its matrix products alone.

    bazel build //tools/bench:compute_bench
    /usr/bin/python3 tools/bench/compute_vs_torch.py --threads=1,2 --repeat=3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TORCH_STEP = r"""
import sys, time, torch
dims, batch, steps, warmup, threads = (eval(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                       int(sys.argv[4]), int(sys.argv[5]))  # torch's threads
torch.set_num_threads(threads)
torch.set_num_interop_threads(1)
torch.manual_seed(0)
layers = []
for i in range(len(dims) - 1):
    layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
    if i + 2 < len(dims):
        layers.append(torch.nn.ReLU())
model = torch.nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(batch, dims[0]), torch.randint(0, dims[-1], (batch,))
def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
for _ in range(warmup):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
print((time.perf_counter() - t0) * 1e3 / steps)
"""


def thread_env(threads: int) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.update(MALLOC_MMAP_THRESHOLD_=str(32 << 20), MALLOC_TRIM_THRESHOLD_=str(1 << 30))
    return env


def ours(a, threads: int) -> dict:
    out = subprocess.run(
        [a.compute_bench, "--device=cpu", f"--threads={threads}", f"--batch={a.batch}",
         f"--dims={a.dims}", f"--steps={a.steps}", f"--warmup={a.warmup}", "--json"],
        env=thread_env(threads), capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout)


def torch_ms(a, threads: int, torch_threads: int) -> float:
    """ms per step with `threads` OpenBLAS/OpenMP threads and torch.set_num_threads(torch_threads)."""
    dims = [int(d) for d in a.dims.split(",")]
    out = subprocess.run(
        [sys.executable, "-c", TORCH_STEP, repr(dims), str(a.batch), str(a.steps), str(a.warmup),
         str(torch_threads)], env=thread_env(threads), capture_output=True, text=True,
        timeout=600, check=True)
    return float(out.stdout.split()[-1])


def main() -> int:
    p = argparse.ArgumentParser(
        description="Our CPU training step against PyTorch's, same model, batch and threads.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--compute_bench", default="bazel-bin/tools/bench/compute_bench",
                   help="the compute_bench binary")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--dims", default="784,512,256,10", help="layer widths")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=300, help="timed steps per measurement")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3, help="alternating measurements of each")
    a = p.parse_args()
    try:
        counts = [int(t) for t in a.threads.split(",")]
        if any(t < 1 for t in counts) or a.batch < 1 or a.steps < 1 or a.repeat < 1:
            raise ValueError
    except ValueError:
        p.error("--threads must list integers >= 1; --batch, --steps, --repeat >= 1")
    if not os.access(a.compute_bench, os.X_OK):
        p.error(f"{a.compute_bench} is not executable: bazel build //tools/bench:compute_bench")

    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')}  cpu: "
          f"{next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')}"
          f", {os.cpu_count()} cores")
    print(f"mlp {a.dims.replace(',', '-')}, batch {a.batch}, {a.steps} steps after {a.warmup}, "
          f"medians of {a.repeat}")
    print(f"{'threads':>7} {'ours ms':>9} {'torch ms':>9} {'torch/ours':>10} {'ours/gemm':>9}  "
          f"runs (ours | torch, by torch.set_num_threads)")
    for t in counts:
        mine, over = [], []
        theirs: dict = {tt: [] for tt in sorted({t, 1})}
        for _ in range(a.repeat):
            r = ours(a, t)
            mine.append(r["train_step_ms"])
            over.append(r["step_over_gemm"])
            for tt in theirs:
                theirs[tt].append(torch_ms(a, t, tt))
        m = statistics.median(mine)
        best = min(theirs, key=lambda tt: statistics.median(theirs[tt]))
        th = statistics.median(theirs[best])
        runs = "; ".join(f"{tt}: {' '.join(f'{v:.2f}' for v in vs)}" for tt, vs in theirs.items())
        print(f"{t:>7} {m:>9.3f} {th:>9.3f} {th / m:>10.2f} {statistics.median(over):>9.2f}  "
              f"{' '.join(f'{v:.2f}' for v in mine)} | {runs} (best: {best})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
