"""Cluster: real ps_server processes for the Python tests.

PS_SERVER_BIN (set by run_python_test.sh) is the ps_server binary. The
servers start and are waited for as python/server_process.py does it (the
--port_file protocol); their logs go to a temporary folder (in
$TEST_TMPDIR under Bazel)."""

import os
import tempfile
import threading

from server_process import start_server

SERVER = os.environ["PS_SERVER_BIN"]


class Cluster:
    """`shards` ps_server processes on 127.0.0.1 ports picked by the kernel."""

    def __init__(self, shards=2, workers=2, mode="sync", lr=0.5, extra=()):
        self.logdir = tempfile.mkdtemp(prefix="cluster.", dir=os.environ.get("TEST_TMPDIR"))
        self.procs = []
        try:
            for s in range(shards):
                self.procs.append(start_server(
                    SERVER, [f"--shard_id={s}", f"--num_shards={shards}",
                             f"--num_workers={workers}", f"--mode={mode}", f"--lr={lr}",
                             "--worker_timeout=0", "--pull_timeout=20"]
                    + [f.format(s=s) for f in extra],
                    logdir=self.logdir, name=f"shard{s}"))
        except BaseException:
            self.close()
            raise
        self.addrs = [p.address for p in self.procs]
        self.servers = ",".join(self.addrs)

    def close(self):
        for p in self.procs:
            p.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def in_threads(fn, timeout, workers=(0, 1)):
    """Runs fn(w) for each worker id w in a thread of its own, all at once,
    and joins each within `timeout` seconds; one still running then is left
    behind, and the caller's checks report what it did not do."""
    ts = [threading.Thread(target=fn, args=(w,)) for w in workers]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
