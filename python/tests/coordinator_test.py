"""ps.Client with a coordinator, through real processes: an etcd (Debian's
etcd-server) and ps_server --coordinator shards. Two clients given neither
servers nor worker ids take ids 0 and 1 and the servers registered in etcd,
train a sync step together, and leave the job when closed; a client that
asks for a taken id is refused naming the holder; connect_from_env reads
PS_COORDINATOR and PS_JOB; killed servers drop out with their leases, and a
client then finds none. A client follows a server killed and restarted on
another port (the shard map), restoring it from its copy. The keys are read back with etcdctl. Three
ps.torch workers with ElasticSampler, the third joining during epoch 0,
split each epoch among its workers (disjoint shares covering it), and the
third starts at epoch 1's first step. Ctrl-C ends a worker's wait for
an epoch (next_epoch()) with KeyboardInterrupt.

Run by //python:coordinator_test (python/tests/run_python_test.sh)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import ps
from cluster import SERVER, Cluster, in_threads
from server_process import start_server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member on free 127.0.0.1 ports, its data in a temporary folder."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="etcd.", dir=os.environ.get("TEST_TMPDIR"))
        port, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{port}"
        self.url = f"etcd://{self.endpoint}"
        client, peer_url = f"http://{self.endpoint}", f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name=t", f"--data-dir={self.dir}/data",
             f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
             f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
             f"--initial-cluster=t={peer_url}"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while self.keys("/") is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("etcd did not start; see " + self.log.name)
            time.sleep(0.1)

    def keys(self, prefix):
        """The keys under `prefix` (etcdctl), or None when etcd does not answer."""
        r = subprocess.run(["etcdctl", f"--endpoints={self.endpoint}", "--command-timeout=2s",
                            "get", "--prefix", "--keys-only", prefix],
                           env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
        return None if r.returncode != 0 else [k for k in r.stdout.split("\n") if k]

    def values(self, prefix):
        """The values of the keys under `prefix` (etcdctl; [] when etcd does not answer)."""
        r = subprocess.run(["etcdctl", f"--endpoints={self.endpoint}", "--command-timeout=2s",
                            "get", "--prefix", "--print-value-only", prefix],
                           env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
        return [] if r.returncode != 0 else [v for v in r.stdout.split("\n") if v]

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class CoordinatorTest(unittest.TestCase):
    def test_clients_take_ids_and_servers_from_etcd(self):
        etcd = Etcd()
        try:
            extra = [f"--coordinator={etcd.url}", "--job=py", "--coordinator_ttl=2"]
            with Cluster(shards=2, workers=2, mode="sync", lr=0.5, extra=extra) as c:
                self.assertEqual(etcd.keys("/ps/py/"), ["/ps/py/servers/0", "/ps/py/servers/1",
                                                        "/ps/py/settings", "/ps/py/shard_map"])
                # The second is given no worker count: it takes the job's.
                clients = [ps.Client(None, None, n, coordinator=etcd.url, job="py",
                                     coordinator_ttl=2, connect_timeout=10, wait_timeout=30)
                           for n in (2, None)]
                self.assertEqual(sorted(cl.worker_id for cl in clients), [0, 1])
                self.assertEqual([cl.num_workers for cl in clients], [2, 2])
                self.assertEqual(etcd.keys("/ps/py/workers/"),
                                 ["/ps/py/workers/0", "/ps/py/workers/1"])
                by_id = {cl.worker_id: cl for cl in clients}
                in_threads(lambda w: by_id[w].init({"w": np.zeros(4, np.float32)}), 60)
                out = {}

                def step(w):
                    out[w] = by_id[w].push_pull({"w": np.full(4, w + 1, np.float32)})
                in_threads(step, 60)
                # The mean of the two gradients (1 and 2) at lr 0.5: -0.75.
                for w in (0, 1):
                    np.testing.assert_array_equal(out[w]["w"], np.full(4, -0.75, np.float32))
                # A taken id is refused, naming the live holder.
                with self.assertRaisesRegex(ps.AlreadyExists, "workers 1 of job py is taken"):
                    ps.Client(c.servers, 1, 2, coordinator=etcd.url, job="py")
                by_id[1].close()  # leaves at once
                self.assertEqual(etcd.keys("/ps/py/workers/"), ["/ps/py/workers/0"])
                # connect_from_env: PS_COORDINATOR and PS_JOB only.
                env = {"PS_COORDINATOR": etcd.url, "PS_JOB": "py"}
                saved = {k: os.environ.get(k) for k in
                         list(env) + ["PS_SERVERS", "PS_WORKER_ID", "PS_NUM_WORKERS", "PS_TLS_DIR"]}
                try:
                    for k in saved:
                        os.environ.pop(k, None)
                    os.environ.update(env)
                    again = ps.connect_from_env(connect_timeout=10)
                    self.assertEqual(again.worker_id, 1)  # the id worker 1 left
                    self.assertEqual(again.num_workers, 2)
                    again.close()
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                by_id[0].close()
                self.assertEqual(etcd.keys("/ps/py/workers/"), [])
            # The cluster's servers were killed (SIGKILL): etcd drops them
            # when their 2 s leases run out.
            deadline = time.monotonic() + 15
            while etcd.keys("/ps/py/servers/") and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual(etcd.keys("/ps/py/servers/"), [])
            with self.assertRaisesRegex(ps.FailedPrecondition, "no server of job py"):
                ps.Client(None, None, 2, coordinator=etcd.url, job="py")
        finally:
            etcd.close()
        with self.assertRaisesRegex(ValueError, "required without a coordinator"):
            ps.Client(None, 0, 1)

    def test_a_client_follows_a_server_restarted_elsewhere(self):
        etcd = Etcd()
        try:
            extra = [f"--coordinator={etcd.url}", "--job=pyf", "--coordinator_ttl=2"]
            with Cluster(shards=2, workers=1, mode="async", lr=0.5, extra=extra) as c:
                client = ps.Client(None, 0, 1, coordinator=etcd.url, job="pyf",
                                   coordinator_ttl=2, connect_timeout=10, retry_timeout=30)
                client.init({"w": np.zeros(4, np.float32)})
                client.push_pull({"w": np.ones(4, np.float32)})
                # Shard 1 dies and comes back, empty, on another port once
                # its key has expired: the client's next step finds it
                # there in the shard map and restores it from its copy.
                old = c.procs[1]
                old.stop(signal.SIGKILL)
                deadline = time.monotonic() + 15
                while "/ps/pyf/servers/1" in etcd.keys("/ps/pyf/servers/"):
                    self.assertLess(time.monotonic(), deadline, "shard 1's key did not expire")
                    time.sleep(0.2)
                new = start_server(SERVER, ["--shard_id=1", "--num_shards=2", "--num_workers=1",
                                            "--mode=async", "--lr=0.5"] + extra,
                                   logdir=c.logdir, name="shard1b")
                c.procs[1] = new
                self.assertNotEqual(new.address, old.address)
                w = client.push_pull({"w": np.ones(4, np.float32)})["w"]
                np.testing.assert_array_equal(w, np.full(4, -1.0, np.float32))  # two steps
                client.close()
        finally:
            etcd.close()

    def test_elastic_sampler_shares_each_epoch_by_membership(self):
        import torch
        import ps.torch
        etcd = Etcd()
        try:
            extra = [f"--coordinator={etcd.url}", "--job=sh", "--coordinator_ttl=2",
                     "--worker_timeout=0"]
            with Cluster(shards=1, workers=3, mode="sync", lr=0.1, extra=extra):
                n, batch, epochs = 1200, 100, 4
                x = torch.randn(n, 2, generator=torch.Generator().manual_seed(1))
                y = x.sum(dim=1, keepdim=True)
                seen, firsts, versions = {}, {}, {}
                started, joined = threading.Event(), threading.Event()
                # The first two register before either asks for a share, so
                # that epoch 0 lists both.
                registered = threading.Barrier(2)

                def train(k):
                    client = ps.Client(None, None, None, coordinator=etcd.url, job="sh",
                                       coordinator_ttl=2, data_shares=True, connect_timeout=10,
                                       wait_timeout=60)
                    w = client.worker_id
                    if k == 2:
                        joined.set()
                    else:
                        registered.wait(30)
                    torch.manual_seed(0)
                    model = torch.nn.Linear(2, 1)
                    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
                    sampler = ps.torch.ElasticSampler(n, batch, opt, epochs=epochs)
                    while sampler.next_epoch():
                        epoch, first, rank, workers = sampler.share
                        firsts.setdefault(w, (epoch, first))
                        if k == 0:
                            started.set()
                            # The third joins while epoch 0 runs.
                            joined.wait(30)
                        idx = list(sampler)
                        seen[w, epoch] = (rank, workers, first, idx)
                        for i in range(0, len(idx), batch):
                            b = torch.tensor(idx[i:i + batch])
                            opt.zero_grad()
                            torch.nn.functional.mse_loss(model(x[b]), y[b]).backward()
                            opt.step()
                    versions[w] = client.version
                    client.close()

                threads = [threading.Thread(target=train, args=(k,)) for k in (0, 1)]
                for t in threads:
                    t.start()
                    time.sleep(0.5)  # in turn: ids 0 and 1
                self.assertTrue(started.wait(30))
                threads.append(threading.Thread(target=train, args=(2,)))
                threads[-1].start()
                for t in threads:
                    t.join(120)
                # Epoch 0: 2 workers (6 steps), then 3 (4 steps each).
                steps = {2: 6, 3: 4}
                first = 0
                for epoch in range(epochs):
                    shares = sorted(v for (w, e), v in seen.items() if e == epoch)
                    workers = 2 if epoch == 0 else 3
                    self.assertEqual([(r, m, f) for r, m, f, _ in shares],
                                     [(r, workers, first) for r in range(workers)])
                    taken = [i for *_, idx in shares for i in idx]
                    self.assertEqual(len(taken), steps[workers] * workers * batch)
                    self.assertEqual(len(set(taken)), len(taken))  # disjoint
                    first += steps[workers]
                self.assertEqual(firsts[2], (1, 6))  # the joiner: from epoch 1's first step
                self.assertEqual(versions, {0: first, 1: first, 2: first})
        finally:
            etcd.close()

    def test_ctrl_c_ends_a_wait_for_an_epoch(self):
        import torch
        import ps.torch
        etcd = Etcd()
        # A worker that joins during epoch 0 waits in next_epoch() for epoch
        # 1, which the first worker (below, holding epoch 0) never ends.
        joiner = '''
import sys, torch, ps, ps.torch
client = ps.Client(None, None, None, coordinator=sys.argv[1], job="cc", coordinator_ttl=2,
                   data_shares=True, connect_timeout=10)
opt = ps.torch.DistributedOptimizer(torch.nn.Linear(2, 1).named_parameters(), client)
sampler = ps.torch.ElasticSampler(100, 10, opt, epochs=2)
try:
    sampler.next_epoch()
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
'''
        try:
            extra = [f"--coordinator={etcd.url}", "--job=cc", "--coordinator_ttl=2"]
            with Cluster(shards=1, workers=2, mode="async", lr=0.1, extra=extra):
                client = ps.Client(None, None, None, coordinator=etcd.url, job="cc",
                                   coordinator_ttl=2, data_shares=True, connect_timeout=10)
                opt = ps.torch.DistributedOptimizer(torch.nn.Linear(2, 1).named_parameters(),
                                                    client)
                sampler = ps.torch.ElasticSampler(100, 10, opt, epochs=2)
                self.assertTrue(sampler.next_epoch())
                self.assertEqual(sampler.share, (0, 0, 0, 1))
                proc = subprocess.Popen([sys.executable, "-c", joiner, etcd.url],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
                try:
                    # Its key says "waiting" once it waits for epoch 1.
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline and not any(
                            v.endswith(" waiting") for v in etcd.values("/ps/cc/workers/")):
                        if proc.poll() is not None:
                            self.fail("the joiner ended: " + proc.communicate()[0])
                        time.sleep(0.1)
                    time.sleep(1.5)  # well inside its wait
                    self.assertIsNone(proc.poll())
                    proc.send_signal(signal.SIGINT)
                    out, _ = proc.communicate(timeout=10)
                    self.assertEqual(proc.returncode, 3, out)
                    self.assertIn("KeyboardInterrupt", out)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                client.close()
        finally:
            etcd.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
