"""Cluster: real ps_server processes for the Python tests.

PS_SERVER_BIN (set by run_python_test.sh) is the ps_server binary."""

import os
import re
import subprocess
import threading

SERVER = os.environ["PS_SERVER_BIN"]


class Cluster:
    """`shards` ps_server processes on 127.0.0.1 ports picked by the kernel."""

    def __init__(self, shards=2, workers=2, mode="sync", lr=0.5, extra=()):
        self.procs, self.addrs = [], []
        for s in range(shards):
            p = subprocess.Popen(
                [SERVER, "--listen=127.0.0.1:0", f"--shard_id={s}", f"--num_shards={shards}",
                 f"--num_workers={workers}", f"--mode={mode}", f"--lr={lr}",
                 "--worker_timeout=0", "--pull_timeout=20"] + [f.format(s=s) for f in extra],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.procs.append(p)
            line = p.stdout.readline()
            m = re.match(r"listening on (\S+)", line)
            if not m:
                self.close()
                raise RuntimeError(f"ps_server said {line!r}")
            self.addrs.append(m.group(1))
        self.servers = ",".join(self.addrs)

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)
            p.stdout.close()

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
