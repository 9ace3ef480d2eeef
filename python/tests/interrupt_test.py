"""Ctrl-C ends a program blocked in the ps package, and close() ends a call.

Run by //python:interrupt_test (python/tests/run_python_test.sh).

The scripts below run as child processes against real ps_server shards (sync,
two workers, of which only worker 0 runs, so its calls wait for a worker that
never comes, up to the servers' --pull_timeout of 20 s). Each does not catch
KeyboardInterrupt: once it prints "blocking" and has waited in the call for a
moment, it gets SIGINT and must be gone within EXIT_WITHIN seconds, killed by
the KeyboardInterrupt (Python's exit status for it: -SIGINT), the call it was
in never having returned. Before PsClient::Cancel, the interrupted call ran
on to its deadline and the interpreter's exit waited for it (about 20 s
here).
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections import OrderedDict

import numpy as np

import ps
from cluster import Cluster
from server_process import wait_until

EXIT_WITHIN = 3.0  # seconds from SIGINT to the process's end
BLOCKED_FOR = 0.5  # seconds in the blocking call before the signal

PULL = r"""
import sys
import numpy as np
import ps
client = ps.Client(sys.argv[1], 0, 2, connect_timeout=20)
client.init({"w": np.zeros(4, np.float32)})
print("blocking", flush=True)
client.pull(min_version=1)  # step 1 needs worker 1, which never comes
print("returned", flush=True)
"""

STEP = r"""
import sys
import torch
import ps.torch
torch.set_num_threads(1)
model = torch.nn.Linear(3, 2)
client = ps.torch.connect_from_env(connect_timeout=20)
opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
opt.zero_grad()
model(torch.ones(4, 3)).sum().backward()
print("blocking", flush=True)
opt.step()  # sync: waits for worker 1's gradient, which never comes
print("returned", flush=True)
"""

CONNECT = r"""
import sys
import ps
print("blocking", flush=True)
ps.Client(sys.argv[1], 0, 1, connect_timeout=60)  # no server there: waits for one
print("returned", flush=True)
"""


def read(path):
    with open(path) as f:
        return f.read()


def unused_port():
    """A loopback port nothing listens on (the kernel's pick, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CtrlCTest(unittest.TestCase):
    def interrupt(self, script, servers, env=None):
        """Runs `script` with `servers` as argv[1]; once it is blocked, sends
        SIGINT and returns the seconds until it ended, its status and its
        output."""
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            child = subprocess.Popen([sys.executable, "-u", "-c", script, servers],
                                     env=dict(os.environ, **(env or {})), stdout=out,
                                     stderr=err)
        try:
            def blocking():
                if child.poll() is not None:
                    raise AssertionError(f"the script exited ({child.returncode}): "
                                         f"{read(err_path)[-2000:]}")
                return "blocking" in read(out_path)

            wait_until(blocking, timeout=60, what="the script's 'blocking' line")
            time.sleep(BLOCKED_FOR)  # now inside the call, GIL released
            self.assertIsNone(child.poll(), "the call did not block")
            start = time.monotonic()
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.fail("the script did not exit within 30 s of SIGINT")
            took = time.monotonic() - start
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
        return took, child.returncode, read(out_path), read(err_path)

    def assert_ended_by_ctrl_c(self, took, status, out, err):
        print(f"exited {took:.2f} s after SIGINT, status {status}")
        self.assertEqual(status, -signal.SIGINT, f"stderr:\n{err[-3000:]}")
        self.assertIn("KeyboardInterrupt", err)
        self.assertNotIn("returned", out)
        self.assertLess(took, EXIT_WITHIN)

    def test_ctrl_c_ends_a_script_blocked_in_pull(self):
        with Cluster(shards=2, workers=2, mode="sync") as c:
            self.assert_ended_by_ctrl_c(*self.interrupt(PULL, c.servers))

    def test_ctrl_c_ends_a_script_blocked_in_distributed_optimizer_step(self):
        with Cluster(shards=2, workers=2, mode="sync") as c:
            env = {"PS_SERVERS": c.servers, "PS_WORKER_ID": "0", "PS_NUM_WORKERS": "2"}
            self.assert_ended_by_ctrl_c(*self.interrupt(STEP, c.servers, env))

    def test_ctrl_c_ends_a_script_waiting_to_connect(self):
        self.assert_ended_by_ctrl_c(*self.interrupt(CONNECT, f"127.0.0.1:{unused_port()}"))


def model():
    return OrderedDict([("w", np.arange(4, dtype=np.float32)), ("b", np.ones(2, np.float32))])


class CloseTest(unittest.TestCase):
    def test_close_from_another_thread_ends_a_blocked_call_with_cancelled(self):
        with Cluster(shards=2, workers=2, mode="sync") as c:
            client = ps.Client(c.servers, 0, 2, connect_timeout=20, wait_timeout=60)
            client.init(model())
            got = {}

            def pull():
                try:
                    client.pull(min_version=1)  # worker 1 never comes
                    got["returned"] = True
                except BaseException as e:  # checked below
                    got["error"] = e

            t = threading.Thread(target=pull)
            t.start()
            time.sleep(BLOCKED_FOR)
            self.assertTrue(t.is_alive(), f"the pull did not block: {got}")
            start = time.monotonic()
            client.close()
            t.join(EXIT_WITHIN)
            took = time.monotonic() - start
            self.assertFalse(t.is_alive(), "the pull did not end when the client closed")
            print(f"the pull ended {took:.2f} s after close()")
            self.assertIsInstance(got.get("error"), ps.Cancelled, got)
            self.assertIn("cancelled (PsClient::Cancel)", str(got["error"]))
            self.assertTrue(issubclass(ps.Cancelled, ps.Error))
            self.assertTrue(client.closed)
            with self.assertRaisesRegex(ValueError, "the client is closed"):
                client.pull()
            client.close()  # again: nothing

    def test_leaving_the_with_block_cancels_a_push_pull_in_flight(self):
        with Cluster(shards=2, workers=2, mode="sync") as c:
            start = None
            with ps.Client(c.servers, 0, 2, connect_timeout=20, wait_timeout=60) as client:
                client.init(model())
                out = OrderedDict((n, np.empty_like(a)) for n, a in model().items())
                p = client.start_push_pull(out)
                for n, a in model().items():
                    p.send(n, np.ones_like(a))  # all sent: waits for worker 1 in flight
                start = time.monotonic()
            took = time.monotonic() - start
            print(f"closed {took:.2f} s after leaving the block")
            self.assertLess(took, EXIT_WITHIN)
            self.assertTrue(client.closed)
            with self.assertRaisesRegex(ValueError, "the client is closed"):
                p.wait()

    def test_a_caught_ctrl_c_leaves_the_client_usable_at_once(self):
        with Cluster(shards=2, workers=2, mode="sync") as c:
            client = ps.Client(c.servers, 0, 2, connect_timeout=20, wait_timeout=60)
            client.init(model())
            ones = OrderedDict((n, np.ones_like(a)) for n, a in model().items())
            timer = threading.Timer(BLOCKED_FOR, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            start = time.monotonic()
            with self.assertRaises(KeyboardInterrupt):
                client.push_pull(ones)  # worker 1 never comes
            self.assertLess(time.monotonic() - start, BLOCKED_FOR + EXIT_WITHIN)
            timer.join()
            # The interrupted push-pull was cancelled: the next call does not
            # wait for it.
            start = time.monotonic()
            w = client.pull()
            self.assertLess(time.monotonic() - start, EXIT_WITHIN)
            np.testing.assert_array_equal(w["w"], model()["w"])
            self.assertEqual(client.version, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
