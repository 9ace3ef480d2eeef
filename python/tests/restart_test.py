"""A parameter-server shard killed and restarted mid-run, survived by Python workers.

Run by //python:restart_test (python/tests/run_python_test.sh).

The C++ client's guarantee (docs/failures.md, "A server dies"): the workers
retry for up to retry_timeout; the restarted shard comes back from its
checkpoint, the workers put back their copy of the last completed step, the
open step's gradients are pushed again and applied once, and in sync mode
the final model equals a fault-free run's bit for bit. ps.Client wraps that
client, so Python workers must get the same:

  sync:  two workers (threads, each its own ps.Client and
         ps.torch.DistributedOptimizer) train a small conv net for STEPS
         steps on 2 shards; shard 1 (checkpoints every CKPT_EVERY versions)
         gets SIGKILL at step KILL_AT, while worker 1 is pushing and worker 0
         is held just before its push; worker 0 is then let go, and OUTAGE
         seconds later the shard is restarted on the same address.
         Both workers finish every step with no exception, at version STEPS,
         with weights equal to each other and to a fault-free run's, bit for
         bit; the restarted shard's log shows the checkpoint and the
         workers' copy that restored it.
  async: the same kill and restart, both workers held at KILL_AT and let go
         into the outage: both finish every step with no exception and the
         shard is restored (async restores may lose pushes by design, so no
         equality is checked).
"""

import os
import signal
import tempfile
import threading
import time
import unittest

import torch

import ps
import ps.torch
from nets import Net
from server_process import start_server

SERVER = os.environ["PS_SERVER_BIN"]
torch.set_num_threads(1)
LR = 0.05
STEPS = 40
KILL_AT = 25      # not a checkpoint version: the workers' copy must fill the gap
CKPT_EVERY = 10
B = 8             # examples per worker per step
TIMEOUT = 90      # seconds: the longest any wait in this test may take
OUTAGE = 1.0      # seconds shard 1 stays dead, the workers retrying


def batches(worker):
    """This worker's STEPS batches, the same in every run."""
    g = torch.Generator().manual_seed(100 + worker)
    return [(torch.randn(B, 1, 8, 8, generator=g), torch.randint(0, 10, (B,), generator=g))
            for _ in range(STEPS)]


def initial_parameters():
    """The model every run starts from (worker 0's, seed 0)."""
    torch.manual_seed(0)
    return list(Net().parameters())


def read(path):
    with open(path) as f:
        return f.read()


def start_shard(shard, mode, logdir, name, listen="127.0.0.1:0", extra=()):
    """One ps_server shard on 127.0.0.1 (on `listen` when restarted); its
    output goes to logdir/NAME.log, appended to on a restart."""
    return start_server(SERVER, [f"--shard_id={shard}", "--num_shards=2", "--num_workers=2",
                                 f"--mode={mode}", f"--lr={LR}", "--pull_timeout=60"]
                        + list(extra), logdir=logdir, name=name, listen=listen)


class Run:
    """Two shards and two worker threads. With `fault`, shard 1 is killed
    while the workers are at step KILL_AT (sync: worker 1 pushing it, worker
    0 held before it; async: both held), the workers are let go to push into
    the dead shard, and OUTAGE seconds later the shard restarts on its
    address from its checkpoints."""

    def __init__(self, tmp, name, mode, fault):
        self.tmp, self.name, self.mode, self.fault = tmp, name, mode, fault
        self.errors, self.versions = [], {}
        self.at_kill_step = [threading.Event(), threading.Event()]
        self.resume = threading.Event()    # shard 1 was killed: push step KILL_AT
        self.ckpt = os.path.join(tmp, f"{name}-ckpt1")
        self.names = [f"{name}-server{s}" for s in (0, 1)]
        self.logs = [os.path.join(tmp, f"{n}.log") for n in self.names]

    def worker(self, w, model, client):
        try:
            opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
            for step, (x, y) in enumerate(batches(w)):
                if self.fault and step == KILL_AT:
                    # Held before this step's push: worker 0 always; worker 1
                    # in async (in sync it blocks in its push, waiting for 0).
                    self.at_kill_step[w].set()
                    if (w == 0 or self.mode == "async") and not self.resume.wait(TIMEOUT):
                        raise TimeoutError("not resumed after the kill")
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            self.versions[w] = client.version
        except BaseException as e:  # reported by the main thread
            self.errors.append((w, e))
            self.at_kill_step[w].set()

    def train(self):
        """The workers' final models."""
        ckpt = [f"--checkpoint_dir={self.ckpt}", f"--checkpoint_every={CKPT_EVERY}"]
        servers = [start_shard(0, self.mode, self.tmp, self.names[0]),
                   start_shard(1, self.mode, self.tmp, self.names[1], extra=ckpt)]
        try:
            addrs = ",".join(s.address for s in servers)
            clients = [ps.Client(addrs, w, 2, connect_timeout=10, wait_timeout=60,
                                 retry_timeout=60) for w in (0, 1)]
            torch.manual_seed(0)
            models = [Net(), Net()]  # worker 1's own values are replaced by worker 0's
            threads = [threading.Thread(target=self.worker, args=(w, models[w], clients[w]))
                       for w in (0, 1)]
            for t in threads:
                t.start()
            if self.fault:
                if not all(e.wait(TIMEOUT) for e in self.at_kill_step):
                    raise TimeoutError("the workers did not reach the kill step")
                if not self.errors:
                    # Worker 1's sync push a moment to be in flight (either
                    # way the retry path runs: worker 0's push surely does).
                    time.sleep(0.3)
                    servers[1].stop(signal.SIGKILL)
                    self.resume.set()
                    time.sleep(OUTAGE)  # the workers' calls fail and retry meanwhile
                    servers[1] = start_shard(1, self.mode, self.tmp, self.names[1],
                                             listen=servers[1].address, extra=ckpt)
                self.resume.set()
            for t in threads:
                t.join(TIMEOUT)
                if t.is_alive():
                    raise TimeoutError(f"{self.name}: a worker did not finish in {TIMEOUT} s")
            return models
        finally:
            self.resume.set()
            for s in servers:
                s.stop()


class ServerRestartTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def assert_finished(self, run):
        self.assertEqual(run.errors, [], f"{run.name}: the workers raised")
        self.assertEqual(sorted(run.versions), [0, 1], f"{run.name}: a worker did not finish")

    def test_sync_workers_end_equal_to_a_fault_free_run(self):
        ref = Run(self.tmp, "ref", "sync", fault=False)
        ref_models = ref.train()
        self.assert_finished(ref)

        run = Run(self.tmp, "run", "sync", fault=True)
        models = run.train()
        self.assert_finished(run)
        self.assertEqual(run.versions, {0: STEPS, 1: STEPS}, "sync: version != steps")
        restarted = read(run.logs[1])
        print("restarted shard 1:", *[l for l in restarted.splitlines()
                                      if "restored" in l or "checkpoint" in l][-3:], sep="\n  ")
        self.assertRegex(restarted, rf"restored checkpoint .* \(version {CKPT_EVERY * 2}\)",
                         "shard 1 did not come back from its checkpoint")
        self.assertRegex(restarted, rf"restored to version {KILL_AT} from worker [01]",
                         "the workers did not put back their copy of the last step")

        for (n, p), q, r in zip(models[0].named_parameters(), models[1].parameters(),
                                ref_models[0].parameters()):
            self.assertTrue(torch.equal(p, q), f"{n}: the workers differ")
            self.assertTrue(torch.equal(p, r),
                            f"{n}: differs from the fault-free run by {(p - r).abs().max()}")
        # The test can fail: the run moved the weights (a restart that lost
        # every update would still leave the workers equal to each other).
        self.assertFalse(all(torch.equal(p, q) for p, q in
                             zip(models[0].parameters(), initial_parameters())))

    def test_async_workers_finish_every_step(self):
        run = Run(self.tmp, "async", "async", fault=True)
        run.train()
        self.assert_finished(run)
        self.assertRegex(read(run.logs[1]), r"restored",
                         "shard 1 did not restore anything after its restart")

if __name__ == "__main__":
    unittest.main(verbosity=2)
