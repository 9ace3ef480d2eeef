"""ps.torch.DistributedOptimizer through real ps_server processes.

Run by //python:torch_test (python/tests/run_python_test.sh)."""

import copy
import os
import subprocess
import sys
import unittest

import torch

import ps
import ps.torch
from cluster import Cluster, in_threads
from nets import Net

torch.set_num_threads(1)
LR = 0.1
STEPS = 20
B = 8  # per worker


def batches(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(2 * B, 1, 8, 8, generator=g), torch.randint(0, 10, (2 * B,), generator=g))
            for _ in range(STEPS)]


def train_worker(model, opt, data, worker, errors, sent_in_backward):
    try:
        for x, y in data:
            xs, ys = x[worker * B:(worker + 1) * B], y[worker * B:(worker + 1) * B]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xs), ys).backward()
            # What the backward hooks handed to the push-pull before step().
            sent_in_backward.append(set(opt._sent))
            opt.step()
    except BaseException as e:  # reported by the main thread
        errors.append(e)


def run_workers(models, opts, data):
    """Trains models[w] with opts[w] on worker w's half of each batch, in two
    threads; returns the errors and, by step, the tensors sent in backward."""
    errors, sent = [], []
    in_threads(lambda w: train_worker(models[w], opts[w], data, w, errors, sent), 120)
    return errors, sent


class DistributedOptimizerTest(unittest.TestCase):
    def test_two_sync_workers_match_sgd_on_the_concatenated_batch(self):
        for overlap in (True, False):
            with self.subTest(overlap=overlap):
                self.two_sync_workers_match_sgd(overlap)

    def two_sync_workers_match_sgd(self, overlap):
        torch.manual_seed(0)
        reference = Net()
        models = [copy.deepcopy(reference) for _ in range(2)]
        # Worker 1 starts from other values: the servers' must replace them.
        with torch.no_grad():
            for p in models[1].parameters():
                p.add_(1.0)
        data = batches()
        with Cluster(shards=2, workers=2, mode="sync", lr=LR) as c:
            clients = [ps.Client(c.servers, w, 2, connect_timeout=10, wait_timeout=30)
                       for w in (0, 1)]
            opts = [None, None]

            def make(w):
                opts[w] = ps.torch.DistributedOptimizer(models[w].named_parameters(), clients[w],
                                                        overlap=overlap)

            in_threads(make, 60)
            for a, b in zip(models[0].parameters(), models[1].parameters()):
                self.assertTrue(torch.equal(a, b), "worker 1 did not start from worker 0's values")
            errors, sent = run_workers(models, opts, data)
            self.assertEqual(errors, [])
            self.assertEqual(clients[0].version, STEPS)
            # With overlap every gradient left during backward; without, none.
            names = {n for n, _ in reference.named_parameters()}
            self.assertEqual(sent, [names if overlap else set()] * (2 * STEPS))

        sgd = torch.optim.SGD(reference.parameters(), lr=LR)
        for x, y in data:
            sgd.zero_grad()
            torch.nn.functional.cross_entropy(reference(x), y).backward()
            sgd.step()

        # Both workers hold the servers' weights: equal to each other exactly.
        # Against single-process SGD on the batch of 2B they differ only by
        # float reassociation: the servers average two means of B per-example
        # gradients, SGD takes one mean of 2B, and the conv/linear backward
        # sums in other orders. Each step adds a few ulps (float32 eps 6e-8)
        # per weight; 20 steps of a contracting model keep it far below 1e-5
        # of the tensor's largest weight.
        worst = 0.0
        for (n, p), q, r in zip(models[0].named_parameters(), models[1].parameters(),
                                reference.parameters()):
            self.assertTrue(torch.equal(p, q), n)
            rel = ((p - r).abs().max() / r.abs().max()).item()
            worst = max(worst, rel)
            self.assertLessEqual(rel, 1e-5, n)
        print(f"overlap={overlap}: max relative difference to SGD on the concatenated batch: "
              f"{worst:.3g}")

    def test_async_workers_train_and_unused_parameters_get_zero_gradients(self):
        torch.manual_seed(1)
        models = [Net() for _ in range(2)]
        for m in models:
            m.unused = torch.nn.Linear(2, 2)  # never in forward: no gradient
        data = batches(seed=1)
        with Cluster(shards=2, workers=2, mode="async", lr=LR) as c:
            clients = [ps.Client(c.servers, w, 2, connect_timeout=10) for w in (0, 1)]
            opts = [None, None]
            # Worker 0 creates the parameters first, in async mode.
            for w in (0, 1):
                opts[w] = ps.torch.DistributedOptimizer(models[w].named_parameters(), clients[w])
            unused = models[0].unused.weight.detach().clone()
            loss_before = sum(torch.nn.functional.cross_entropy(models[0](x), y).item()
                              for x, y in data)
            errors, sent = run_workers(models, opts, data)
            self.assertEqual(errors, [])
            self.assertTrue(all("unused.weight" not in s and "conv.weight" in s for s in sent))
            final = clients[0].pull()
            self.assertTrue(torch.equal(torch.from_numpy(final["unused.weight"]), unused))
            with torch.no_grad():
                for n, p in models[0].named_parameters():
                    p.copy_(torch.from_numpy(final[n]))
            loss_after = sum(torch.nn.functional.cross_entropy(models[0](x), y).item()
                             for x, y in data)
            self.assertLess(loss_after, loss_before)

    def test_a_gradient_produced_twice_before_step_is_an_error(self):
        with Cluster(shards=1, workers=1, mode="sync", lr=LR) as c:
            client = ps.Client(c.servers, 0, 1, connect_timeout=10, wait_timeout=10)
            model = Net()
            opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
            x, y = batches()[0]
            torch.nn.functional.cross_entropy(model(x), y).backward()
            with self.assertRaisesRegex(RuntimeError, "produced twice before step"):
                torch.nn.functional.cross_entropy(model(x), y).backward()
            # The push-pull of the first backward still completes.
            before = model.fc2.bias.detach().clone()
            opt.step()
            self.assertEqual(client.version, 1)
            self.assertFalse(torch.equal(model.fc2.bias, before))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            self.assertEqual(client.version, 2)

    def test_step_loads_the_servers_weights_into_every_kind_of_parameter(self):
        # step() swaps a contiguous parameter's storage with the buffer the
        # weights arrived in, and copies into a non-contiguous one: either way
        # the parameters hold the servers' weights, the parameter objects stay
        # the same, and a tensor kept from before step() is not changed by it.
        torch.manual_seed(2)
        model = Net()
        model.t = torch.nn.Parameter(torch.randn(3, 4).t())  # not contiguous
        with Cluster(shards=2, workers=1, mode="sync", lr=LR) as c:
            client = ps.Client(c.servers, 0, 1, connect_timeout=10, wait_timeout=30)
            opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
            params = dict(model.named_parameters())
            for x, y in batches()[:3]:
                kept = {n: p.detach().clone() for n, p in params.items()}
                views = {n: p.detach() for n, p in params.items()}
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[:B]), y[:B])
                loss = loss + model.t.square().sum()
                loss.backward()
                opt.step()
                self.assertEqual(dict(model.named_parameters()), params)
                weights = client.pull()
                for n, p in params.items():
                    self.assertTrue(torch.equal(p, torch.from_numpy(weights[n])), n)
                    self.assertFalse(torch.equal(p, kept[n]), f"{n} did not change")
                    if n != "t":  # swapped: the old storage is no longer the parameter's
                        self.assertNotEqual(p.data_ptr(), views[n].data_ptr(), n)
                self.assertFalse(model.t.is_contiguous())

    def test_keep_freed_memory_keeps_freed_blocks_in_the_process(self):
        # glibc's thresholds fixed at its defaults (the environment turns off
        # their dynamic growth), so that without keep_freed_memory() every
        # 16 MB block is mmapped and unmapped and each reuse page-faults all
        # its pages in again; with it, the block comes from the heap and stays
        # there. Exact by construction; in a child: mallopt changes the process.
        mechanism = r"""
import ctypes, resource, sys, ps.torch
if sys.argv[1] == "keep":
    assert ps.torch.keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
n = 16 << 20
def cycle():
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    cycle()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / (10 * n / 4096))
"""
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
        faulted = {}
        for how in ("keep", "default"):
            r = subprocess.run([sys.executable, "-c", mechanism, how], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            faulted[how] = float(r.stdout.split()[-1])
        print(f"fraction of a reused 16 MB block's pages faulted in: {faulted}")
        self.assertLess(faulted["keep"], 0.01)
        self.assertGreater(faulted["default"], 0.9)

        # What it is for, on a training step: printed, not asserted (the
        # count also holds gRPC's threads and the heap's growth, and varies
        # with the machine's load: means of 4-81 with it, 84-590 without).
        child = r"""
import resource, sys, torch, ps, ps.torch
torch.set_num_threads(1)
torch.manual_seed(0)
nn = torch.nn
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                      nn.Linear(256, 10))
client = ps.Client(sys.argv[1], 0, 1, connect_timeout=10, wait_timeout=30)
opt = ps.torch.DistributedOptimizer(model.named_parameters(), client,
                                    keep_freed_memory=sys.argv[2] == "keep")
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
for step in range(80):
    if step == 40:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 40)
"""
        for how in ("keep", "default"):
            with Cluster(shards=1, workers=1, mode="async", lr=0.01) as c:
                r = subprocess.run([sys.executable, "-c", child, c.servers, how], env=os.environ,
                                   capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            print(f"MLP: page faults per step ({how}): {float(r.stdout.split()[-1])}")

    def test_loads_beside_torch_in_either_import_order(self):
        for code in ("import torch, ps, ps.torch; torch.zeros(1).numpy()",
                     "import ps, ps.torch, torch; torch.nn.Linear(2, 2)(torch.zeros(1, 2))"):
            r = subprocess.run([sys.executable, "-c", code], env=os.environ, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{code}: {r.stderr}")

    def test_refuses_what_the_servers_cannot_hold(self):
        with Cluster(shards=1, workers=1, mode="async") as c:
            client = ps.Client(c.servers, 0, 1, connect_timeout=10)
            with self.assertRaisesRegex(TypeError, "'w'.*float64"):
                ps.torch.DistributedOptimizer(
                    [("w", torch.nn.Parameter(torch.zeros(3, dtype=torch.float64)))], client)
            with self.assertRaisesRegex(ValueError, "not unique"):
                p = torch.nn.Parameter(torch.zeros(3))
                ps.torch.DistributedOptimizer([("w", p), ("w", p)], client)


if __name__ == "__main__":
    unittest.main(verbosity=2)
