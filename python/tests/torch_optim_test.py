"""Server-side optimizers against torch.optim, through real ps_server processes.

For each optimizer (and with weight_decay > 0), one worker pushes a fixed
sequence of 100 gradients through the `ps` package to 2 sync shards started
with --optimizer=X, and torch.optim.X takes the same 100 steps on the same
float32 tensors. The weights must agree within 1e-6 relative, element by
element, after every step.

Why 1e-6: both sides compute in float32 (unit roundoff u = 2^-24 = 6e-8)
the same formulas in the same order (common/optimizer_rules.cc follows
torch 1.13's single-tensor code), with the scalars (bias corrections, step
sizes) in double as Python computes them. They may still round differently:
torch's vectorized kernels fuse a*b + c into one rounding (FMA) where the
server rounds twice, and a step's update may differ by an ulp or two. Such
a difference perturbs w by about u * |w| per step at most, and these
differences are of random sign, so after 100 steps they stay near
sqrt(100) * u = 6e-7 relative; a moment or accumulator that differs by an
ulp changes only the (lr-sized) update, not w, by that relative amount. The
weights start in +-[0.5, 1.5] and the rates keep every step small, so no
weight comes near 0, where a relative bound would mean nothing. A wrong
formula (a missing bias correction, L2 instead of decoupled decay, a
dampened momentum, an off-by-one step) is off by 1e-3 or more.

Run by //python:torch_optim_test (python/tests/run_python_test.sh)."""

import unittest
from collections import OrderedDict

import numpy as np
import torch

import ps
from cluster import Cluster

STEPS = 100
BOUND = 1e-6

SHAPES = OrderedDict([("w", (13, 7)), ("b", (7,)), ("v", (300,))])

# name, torch class, --lr, torch kwargs (the same values go to the server's
# flags; torch's defaults are spelled out where the server's differ).
CASES = [
    ("sgd", torch.optim.SGD, 0.01, {}),
    ("momentum", torch.optim.SGD, 0.001, {"momentum": 0.9}),
    ("nesterov", torch.optim.SGD, 0.001, {"momentum": 0.9, "nesterov": True}),
    ("adagrad", torch.optim.Adagrad, 0.01, {"eps": 1e-10}),
    ("adam", torch.optim.Adam, 0.001, {"betas": (0.9, 0.999), "eps": 1e-8}),
    ("adamw", torch.optim.AdamW, 0.001, {"betas": (0.9, 0.999), "eps": 1e-8}),
]


def flags(name, kw, weight_decay):
    out = [f"--optimizer={name}", f"--weight_decay={weight_decay!r}"]
    if "momentum" in kw:
        out.append(f"--momentum={kw['momentum']!r}")
    if "betas" in kw:
        out += [f"--beta1={kw['betas'][0]!r}", f"--beta2={kw['betas'][1]!r}"]
    if "eps" in kw:
        out.append(f"--eps={kw['eps']!r}")
    return out


def initial(seed=1):
    r = np.random.default_rng(seed)
    return OrderedDict((n, (r.choice([-1.0, 1.0], s) * r.uniform(0.5, 1.5, s)).astype(np.float32))
                       for n, s in SHAPES.items())


def gradients(seed=2):
    r = np.random.default_rng(seed)
    return [OrderedDict((n, r.standard_normal(s).astype(np.float32)) for n, s in SHAPES.items())
            for _ in range(STEPS)]


class TorchOptimTest(unittest.TestCase):
    def run_case(self, name, cls, lr, kw, weight_decay):
        init, grads = initial(), gradients()
        params = OrderedDict((n, torch.tensor(a, requires_grad=True)) for n, a in init.items())
        opt = cls(list(params.values()), lr=lr, weight_decay=weight_decay, **kw)
        worst = 0.0
        with Cluster(shards=2, workers=1, mode="sync", lr=lr,
                     extra=flags(name, kw, weight_decay)) as c:
            client = ps.Client(c.servers, 0, 1, connect_timeout=10, wait_timeout=20)
            client.init(init)
            for t, g in enumerate(grads, start=1):
                got = client.push_pull(g)
                for n, p in params.items():
                    p.grad = torch.from_numpy(g[n].copy())
                opt.step()
                for n, p in params.items():
                    want = p.detach().numpy().astype(np.float64)
                    rel = np.max(np.abs(got[n].astype(np.float64) - want) / np.abs(want))
                    worst = max(worst, float(rel))
                    self.assertLess(rel, BOUND, f"{name} wd={weight_decay}: step {t}, {n}")
            moved = max(float(np.max(np.abs(got[n] - init[n]))) for n in init)
        print(f"{name:9s} weight_decay={weight_decay:<5} lr={lr:<6} max relative difference "
              f"vs torch.optim.{cls.__name__} over {STEPS} steps: {worst:.3g} "
              f"(largest weight change {moved:.3g})", flush=True)
        self.assertGreater(moved, 1e-3)  # the steps did move the weights

    def test_each_optimizer_matches_torch(self):
        for name, cls, lr, kw in CASES:
            for wd in (0.0, 0.01):
                with self.subTest(optimizer=name, weight_decay=wd):
                    self.run_case(name, cls, lr, kw, wd)


if __name__ == "__main__":
    print(f"torch {torch.__version__}", flush=True)
    unittest.main(verbosity=2)
