"""ps.Client through real ps_server processes (plaintext on loopback).

Run by //python:client_test (python/tests/run_python_test.sh)."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import threading
import unittest
from collections import OrderedDict

import numpy as np

import ps
from cluster import Cluster, in_threads


def model(seed=0):
    r = np.random.default_rng(seed)
    return OrderedDict([("conv.w", r.standard_normal((4, 1, 3, 3)).astype(np.float32)),
                        ("fc.w", r.standard_normal((10, 7)).astype(np.float32)),
                        ("fc.b", np.zeros(10, np.float32))])


def bf16(a):
    """`a` rounded to bfloat16 (nearest even) and back: what a bf16 wire delivers."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def connect(cluster, worker_id, workers=2, **kw):
    return ps.Client(cluster.servers, worker_id, workers, connect_timeout=10,
                     wait_timeout=20, **kw)


class ClientTest(unittest.TestCase):
    def test_sync_two_workers_average_each_step(self):
        with Cluster(mode="sync", lr=0.5) as c:
            init = model()
            clients = [connect(c, 0), connect(c, 1)]
            self.assertEqual(clients[0].mode, "sync")
            self.assertEqual(clients[0].num_shards, 2)
            # Worker 1 waits in init for worker 0's values: run both at once.
            t = threading.Thread(target=clients[1].init, args=(model(seed=9),))
            t.start()
            clients[0].init(init)
            t.join(30)
            w = clients[1].pull()
            self.assertEqual(list(w), list(init))
            for n in init:
                np.testing.assert_array_equal(w[n], init[n])
                self.assertEqual(w[n].dtype, np.float32)
            grads = [OrderedDict((n, np.full(a.shape, g, np.float32)) for n, a in init.items())
                     for g in (1.0, 3.0)]
            out = [None, None]

            def step(i):
                out[i] = clients[i].push_pull(grads[i])

            in_threads(step, 30)
            # The mean gradient is 2, the rate 0.5: every weight moves by -1,
            # exactly (small integers and halves are exact in float32).
            for i in (0, 1):
                self.assertEqual(clients[i].version, 1)
                for n in init:
                    np.testing.assert_array_equal(out[i][n], init[n] - np.float32(1.0))

    def test_async_push_then_pull(self):
        with Cluster(mode="async", lr=1.0, workers=1) as c:
            cl = connect(c, 0, workers=1)
            init = model()
            cl.init(init)
            cl.push(OrderedDict((n, np.ones(a.shape, np.float32)) for n, a in init.items()))
            w = cl.pull(min_version=1)
            for n in init:
                np.testing.assert_array_equal(w[n], init[n] - np.float32(1.0))

    def test_ssp_mode_is_named_and_holds_a_worker_too_far_ahead(self):
        with Cluster(mode="ssp", lr=1.0, workers=2, extra=("--staleness=0",)) as c:
            cls = [connect(c, w, workers=2) for w in (0, 1)]
            self.assertEqual(cls[0].mode, "ssp")
            init = model()
            cls[0].init(init)
            cls[1].init(model(seed=9))  # worker 1's values only check the spec
            ones = OrderedDict((n, np.ones(a.shape, np.float32)) for n, a in init.items())
            cls[0].push(ones)
            # Worker 0 is one step ahead with S = 0: its pull waits for worker 1.
            done = threading.Event()
            got = {}
            t = threading.Thread(target=lambda: (got.update(w=cls[0].pull()), done.set()))
            t.start()
            self.assertFalse(done.wait(0.5))
            cls[1].push(ones)
            self.assertTrue(done.wait(10))
            t.join()
            for n in init:
                np.testing.assert_array_equal(got["w"][n], init[n] - np.float32(1) - np.float32(1))

    def test_bf16_wire_rounds_what_travels_and_the_servers_keep_float32(self):
        with Cluster(mode="async", lr=1.0, workers=2) as c:
            with self.assertRaisesRegex(ValueError, "wire_dtype.*'fp8'"):
                connect(c, 0, wire_dtype="fp8")
            narrow, exact = connect(c, 0, wire_dtype="bf16"), connect(c, 1, wire_dtype="f32")
            init = model()
            narrow.init(init)
            exact.init(init)
            self.assertNotEqual(bf16(init["fc.w"]).tobytes(), init["fc.w"].tobytes())
            w = narrow.pull()
            for n in init:
                np.testing.assert_array_equal(w[n], bf16(init[n]))
                self.assertEqual(w[n].dtype, np.float32)
            grads = model(seed=3)
            narrow.push(grads)
            # The server applied the rounded gradient to its float32 weights
            # (lr 1: one exact float32 subtraction per weight).
            after = OrderedDict((n, init[n] - bf16(grads[n])) for n in init)
            w = exact.pull(min_version=1)
            for n in init:
                np.testing.assert_array_equal(w[n], after[n])
            w = narrow.push_pull(OrderedDict((n, np.zeros_like(a)) for n, a in init.items()))
            for n in init:
                np.testing.assert_array_equal(w[n], bf16(after[n]))

    def test_bad_inputs_raise_before_sending(self):
        with Cluster(mode="async", workers=1) as c:
            cl = connect(c, 0, workers=1)
            with self.assertRaisesRegex(ValueError, "call init first"):
                cl.pull()
            init = model()
            cl.init(init)
            good = OrderedDict((n, np.zeros(a.shape, np.float32)) for n, a in init.items())
            bad = dict(good, **{"fc.w": np.zeros((10, 7), np.float64)})
            with self.assertRaisesRegex(TypeError, r"'fc.w'.*float64.*float32"):
                cl.push(bad)
            bad = dict(good, **{"fc.w": np.zeros((7, 10), np.float32)})
            with self.assertRaisesRegex(ValueError, r"'fc.w'.*shape \(7, 10\), expected \(10, 7\)"):
                cl.push(bad)
            bad = dict(good, **{"fc.w": np.zeros((7, 10), np.float32).T})
            with self.assertRaisesRegex(ValueError, r"'fc.w'.*not C-contiguous"):
                cl.push(bad)
            bad = dict(good)
            del bad["fc.b"]
            bad["other"] = np.zeros(3, np.float32)
            with self.assertRaisesRegex(ValueError, r"missing \['fc.b'\], unknown \['other'\]"):
                cl.push(bad)
            bad = dict(good, **{"fc.b": [0.0] * 10})
            with self.assertRaisesRegex(TypeError, r"'fc.b'.*numpy array"):
                cl.push(bad)
            # Nothing above reached the servers: the version is still 0.
            self.assertEqual(cl.version, 0)
            self.assertEqual(cl.pull()["fc.b"].tolist(), [0.0] * 10)

    def test_weights_land_in_the_callers_arrays(self):
        with Cluster(mode="async", lr=1.0, workers=1) as c:
            cl = connect(c, 0, workers=1)
            init = model()
            cl.init(init)
            out = OrderedDict((n, np.full(a.shape, 7, np.float32)) for n, a in init.items())
            self.assertIs(cl.pull(out=out), out)
            for n in init:
                np.testing.assert_array_equal(out[n], init[n])
            ones = OrderedDict((n, np.ones(a.shape, np.float32)) for n, a in init.items())
            ids = {n: id(a) for n, a in out.items()}
            self.assertIs(cl.push_pull(ones, out=out), out)
            self.assertEqual({n: id(a) for n, a in out.items()}, ids)
            for n in init:
                np.testing.assert_array_equal(out[n], init[n] - np.float32(1.0))
            # A torch-free view into a bigger buffer works too: no copy is made.
            flat = np.zeros(sum(a.size for a in init.values()), np.float32)
            views, at = OrderedDict(), 0
            for n, a in init.items():
                views[n] = flat[at:at + a.size].reshape(a.shape)
                at += a.size
            cl.pull(out=views)
            np.testing.assert_array_equal(flat[-10:], init["fc.b"] - np.float32(1.0))
            # Arrays that cannot take the weights are refused by name.
            bad = dict(out, **{"fc.b": np.zeros(10, np.float64)})
            with self.assertRaisesRegex(TypeError, r"'fc.b'.*float64"):
                cl.pull(out=bad)
            ro = np.zeros(10, np.float32)
            ro.flags.writeable = False
            with self.assertRaisesRegex(ValueError, r"'fc.b'.*not writeable"):
                cl.pull(out=dict(out, **{"fc.b": ro}))
            with self.assertRaisesRegex(ValueError, r"'fc.w'.*not C-contiguous"):
                cl.push_pull(ones, out=dict(out, **{"fc.w": np.zeros((7, 10), np.float32).T}))
            self.assertEqual(cl.version, 1)

    def test_push_pull_tensor_by_tensor(self):
        with Cluster(mode="sync", lr=1.0, workers=1) as c:
            cl = connect(c, 0, workers=1)
            init = model()
            cl.init(init)
            out = OrderedDict((n, np.empty(a.shape, np.float32)) for n, a in init.items())
            p = cl.start_push_pull(out)
            for n in reversed(list(init)):
                p.send(n, np.full(init[n].shape, 2, np.float32))
            p.wait()
            for n in init:
                np.testing.assert_array_equal(out[n], init[n] - np.float32(2.0))
            self.assertEqual(cl.version, 1)
            # A name sent twice, or one never sent, fails the push-pull; an
            # unknown name or a wrong shape is refused at once.
            p = cl.start_push_pull(out)
            with self.assertRaisesRegex(ValueError, "'nope': not in the model"):
                p.send("nope", np.zeros(3, np.float32))
            with self.assertRaisesRegex(ValueError, r"'fc.b'.*shape"):
                p.send("fc.b", np.zeros(3, np.float32))
            p.send("fc.b", np.zeros(10, np.float32))
            p.send("fc.b", np.zeros(10, np.float32))
            with self.assertRaisesRegex(ps.InvalidArgument, "sent twice"):
                p.wait()
            p = cl.start_push_pull(out)
            p.send("fc.b", np.zeros(10, np.float32))
            with self.assertRaisesRegex(ps.FailedPrecondition, "2 tensors were never sent"):
                p.wait()
            # Nothing of those was applied.
            self.assertEqual(cl.version, 1)
            np.testing.assert_array_equal(cl.pull()["fc.b"], init["fc.b"] - np.float32(2.0))

    def test_server_refusals_are_ps_errors(self):
        with Cluster(mode="sync", workers=2) as c:
            with self.assertRaises(ps.InvalidArgument) as e:
                connect(c, 5)  # worker id out of range, refused by the client
            self.assertIn("worker_id must be in [0, num_workers=2), got 5", str(e.exception))
            self.assertTrue(issubclass(ps.InvalidArgument, ps.Error))
            with self.assertRaises(ps.Error) as e:
                ps.Client(c.servers, 0, 3, connect_timeout=5)  # the servers have 2 workers
            self.assertIsInstance(e.exception, ps.InvalidArgument)
            cl = connect(c, 0)
            cl.init(model())
            other = connect(c, 1)
            with self.assertRaises(ps.FailedPrecondition) as e:
                other.init(OrderedDict([("x", np.zeros(3, np.float32))]))
            self.assertIn("x", str(e.exception))

    def test_ctrl_c_interrupts_a_blocked_call(self):
        with Cluster(mode="sync", workers=2) as c:
            # Worker 1 never comes: worker 0's pull of step 1 waits for it.
            cl = ps.Client(c.servers, 0, 2, connect_timeout=10, wait_timeout=3)
            init = model()
            cl.init(init)
            grads = OrderedDict((n, np.ones(a.shape, np.float32)) for n, a in init.items())
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            with self.assertRaises(KeyboardInterrupt):
                cl.push_pull(grads)
            self.assertLess(time.monotonic() - start, 2.5)  # its deadline is 3 s
            # The interrupted call was cancelled (interrupt_test checks how
            # soon); the step still never completes, so a pull of it fails
            # at its own deadline.
            with self.assertRaises(ps.DeadlineExceeded):
                cl.pull(min_version=1)

    def test_connect_from_env_names_what_is_wrong(self):
        saved = {k: os.environ.pop(k) for k in ("PS_SERVERS", "PS_WORKER_ID", "PS_NUM_WORKERS",
                                                 "PS_TLS_DIR") if k in os.environ}
        try:
            with self.assertRaisesRegex(ValueError, "PS_SERVERS is not set"):
                ps.connect_from_env()
            os.environ.update(PS_SERVERS="127.0.0.1:1", PS_WORKER_ID="x", PS_NUM_WORKERS="2")
            with self.assertRaisesRegex(ValueError, "PS_WORKER_ID='x' is not an integer"):
                ps.connect_from_env()
            with Cluster(shards=1, workers=2) as c:
                os.environ.update(PS_SERVERS=c.servers, PS_WORKER_ID="1")
                cl = ps.connect_from_env(connect_timeout=10)
                self.assertEqual((cl.num_workers, cl.num_shards), (2, 1))
        finally:
            for k in ("PS_SERVERS", "PS_WORKER_ID", "PS_NUM_WORKERS"):
                os.environ.pop(k, None)
            os.environ.update(saved)

    def test_a_worker_certificate_acts_only_as_its_worker(self):
        with tempfile.TemporaryDirectory() as certs:
            subprocess.run([os.environ["PS_MAKE_CERTS_BIN"], certs, "--servers=1", "--workers=2"],
                           check=True, capture_output=True, timeout=120)
            tls = ["--tls_cert=" + certs + "/server-{s}.pem", "--tls_key=" + certs + "/server-{s}.key",
                   "--tls_ca=" + certs + "/ca.pem"]
            with Cluster(shards=1, workers=2, extra=tls) as c:
                with self.assertRaises(ps.PermissionDenied) as e:
                    ps.Client(c.servers, 0, 2, connect_timeout=10, tls_ca=certs + "/ca.pem",
                              tls_cert=certs + "/worker-1.pem", tls_key=certs + "/worker-1.key")
                self.assertIn("worker-1 may not call Register as worker 0", str(e.exception))
                # tls_dir picks worker-1's own files: allowed.
                cl = ps.Client(c.servers, 1, 2, connect_timeout=10, tls_dir=certs)
                self.assertEqual(cl.num_shards, 1)

    def test_loads_beside_grpcio_in_either_import_order(self):
        with Cluster(shards=1, workers=1, mode="async") as c:
            for order in ("import ps, grpc", "import grpc, ps"):
                code = (f"{order}; import numpy as np\n"
                        f"grpc.channel_ready_future(grpc.insecure_channel('{c.servers}'))"
                        ".result(timeout=10)\n"
                        f"cl = ps.Client('{c.servers}', 0, 1, connect_timeout=10)\n"
                        "cl.init({'w': np.ones(3, np.float32)}); assert cl.pull()['w'].sum() == 3")
                r = subprocess.run([sys.executable, "-c", code], env=os.environ,
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, f"{order}: {r.stderr}")

    def test_unreachable_server_is_unavailable_or_deadline(self):
        with Cluster(shards=1, workers=1) as c:
            addr = c.addrs[0]
        with self.assertRaises((ps.Unavailable, ps.DeadlineExceeded)):
            ps.Client(addr, 0, 1, connect_timeout=1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
