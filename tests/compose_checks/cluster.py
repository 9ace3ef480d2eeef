"""deploy/docker-compose.yml's cluster run by compose_test: the compose
plumbing (up, wait, logs, down, ps_ctl in a container) and the runs (sync
and async training, a killed worker, a killed server, Python workers), each
taken down with `down -v` whatever happened."""
import glob
import os
import re
import shutil
import signal
import tempfile
import time

from .common import COMPOSE_FILE, KILL_LEASE, MIN_ACCURACY, PROJECT, PYTHON_FILE, \
    PYTHON_MIN_ACCURACY, WORKERS, run, tail
from .running_cluster import RunningClusterChecks


# --- the cluster ------------------------------------------------------------
class Cluster(RunningClusterChecks):
    def __init__(self, compose, image, checks):
        self.compose = compose
        self.image = image
        # The monitoring profile's image (PS_PROMETHEUS_IMAGE), tagged alike.
        self.prometheus_image = image.replace("ps:", "ps-prometheus:", 1)
        self.checks = checks

    def cmd(self, *args, files=(COMPOSE_FILE,)):
        argv = list(self.compose) + ["-p", PROJECT]
        for f in files:
            argv += ["-f", f]
        return argv + list(args)

    def env(self, **settings):
        env = dict(os.environ, PS_IMAGE=self.image, PS_PROMETHEUS_IMAGE=self.prometheus_image,
                   DOCKER_BUILDKIT="1")
        env.update({k: str(v) for k, v in settings.items()})
        return env

    def container(self, service):
        out = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}",
                   "--filter", f"label=com.docker.compose.service={service}"], timeout=30).stdout
        ids = out.split()
        return ids[0] if len(ids) == 1 else None

    def logs(self, *services):
        return run(self.cmd("logs", "--no-color", *services), timeout=60).stdout

    def up(self, env, build=False, files=(COMPOSE_FILE,), services=()):
        args = ["up", "-d"] + (["--build"] if build else []) + list(services)
        t0 = time.monotonic()
        p = run(self.cmd(*args, files=files), env=env, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"compose {' '.join(args)} exited {p.returncode}:\n{tail(p.stdout)}")
        return time.monotonic() - t0

    def wait(self, services, timeout):
        """Waits for the services' containers to exit: {service: exit code or None}."""
        ids = {s: self.container(s) for s in services}
        missing = [s for s, i in ids.items() if i is None]
        if missing:
            raise RuntimeError(f"no container for {missing}")
        p = run(["docker", "wait"] + list(ids.values()), timeout=timeout)
        codes = p.stdout.split() if p.returncode == 0 else []
        if len(codes) != len(services):
            return {s: None for s in services}
        return {s: int(c) for s, c in zip(services, codes)}

    def down(self, files=(COMPOSE_FILE,)):
        # With the monitoring profile, so that a `prometheus` container left
        # by a failed monitoring step goes too (and its volume with it).
        p = run(self.cmd("--profile", "monitoring", "down", "-v", files=files), timeout=180)
        return p.returncode == 0, p.stdout

    def check_model_volume(self, name):
        """The model volume, read through worker 0's stopped container."""
        out = tempfile.mkdtemp(prefix="ps-model.")
        try:
            p = run(["docker", "cp", f"{self.container('ps-worker-0')}:/output", out], timeout=120)
            if p.returncode != 0:
                return self.checks.check(name, False, f"docker cp: {tail(p.stdout, 3)}")
            import numpy as np
            files = sorted(glob.glob(os.path.join(out, "output", "model", "*.npy")))
            values, problems = 0, []
            for f in files:
                a = np.load(f)
                values += a.size
                if a.dtype != np.float32 or a.size == 0 or not np.all(np.isfinite(a)):
                    problems.append(f"{os.path.basename(f)}: {a.dtype} {a.shape}, not all finite")
            m = re.search(r"\((\d+) parameters\)", self.logs("ps-worker-0"))
            expected = int(m.group(1)) if m else -1
            metrics = [os.path.getsize(os.path.join(out, "output", f"metrics-worker{w}.jsonl"))
                       if os.path.exists(os.path.join(out, "output", f"metrics-worker{w}.jsonl"))
                       else 0 for w in range(len(WORKERS))]
            ok = files and not problems and values == expected and all(metrics)
            return self.checks.check(
                name, ok, f"{len(files)} .npy files, {values} float32 values (model: {expected} "
                f"parameters){'; ' + '; '.join(problems) if problems else ''}; metrics bytes "
                f"per worker {metrics}")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def train(self, mode, build):
        """One full run in `mode`; checks codes, accuracy and the volume."""
        env = self.env(PS_MODE=mode)
        t0 = time.monotonic()
        try:
            self.up(env, build=build)
            codes = self.wait(WORKERS, timeout=600)
            wall = time.monotonic() - t0
            logs = self.logs("ps-worker-0")
            m = re.search(r"final test_accuracy ([0-9.]+)", logs)
            acc = float(m.group(1)) if m else None
            self.checks.check(f"{mode} cluster: every worker exits 0",
                              all(c == 0 for c in codes.values()),
                              f"exit codes {codes}" + ("" if all(c == 0 for c in codes.values())
                                                       else "\n" + tail(self.logs(), 30)))
            self.checks.check(f"{mode} cluster: worker 0's final accuracy >= {MIN_ACCURACY}",
                              acc is not None and acc >= MIN_ACCURACY,
                              f"test_accuracy {acc}, {wall:.1f} s from `up` to the last exit")
            self.checks.figure(f"compose {mode}: {wall:.1f} s (up to the last worker's exit), "
                               f"worker 0 test_accuracy {acc}")
            self.check_model_volume(f"{mode} cluster: model volume")
            if mode == "sync":
                self.check_monitoring(env)
                self.check_security()
        except RuntimeError as e:
            self.checks.check(f"{mode} cluster", False, str(e))
        finally:
            ok, out = self.down()
            self.checks.check(f"{mode} cluster: down -v", ok, "" if ok else tail(out))

    def wait_for_log(self, service, pattern, timeout):
        """Seconds until `pattern` appears in the service's logs, or None."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if re.search(pattern, self.logs(service)):
                return time.monotonic() - t0
            time.sleep(0.5)
        return None

    def finish(self, name, t0, workers=WORKERS):
        """Each of `workers` exits 0 and worker 0's accuracy holds; returns
        the seconds from t0 to the last exit."""
        codes = self.wait(workers, timeout=600)
        took = time.monotonic() - t0
        m = re.search(r"final test_accuracy ([0-9.]+)", self.logs("ps-worker-0"))
        acc = float(m.group(1)) if m else None
        who = "every worker" if workers == WORKERS else ", ".join(workers)
        self.checks.check(f"{name}: {who} exit 0, accuracy >= {MIN_ACCURACY}",
                          all(c == 0 for c in codes.values()) and acc is not None
                          and acc >= MIN_ACCURACY,
                          f"exit codes {codes}, worker 0 test_accuracy {acc}"
                          + ("" if all(c == 0 for c in codes.values())
                             else "\n" + tail(self.logs(), 30)))
        return took, acc

    def kill_worker(self):
        """Sync mode; worker 2's container is killed once training runs: the
        servers drop it after its lease and the others finish."""
        env = self.env(PS_MODE="sync", PS_WORKER_TIMEOUT=KILL_LEASE)
        name = "killed worker"
        try:
            self.up(env)
            version = self.wait_for_version(20, timeout=180)
            if version < 20:
                raise RuntimeError(f"training did not reach version 20 within 180 s "
                                   f"(at {version}):\n{tail(self.logs(), 30)}")
            run(["docker", "kill", self.container("ps-worker-2")], timeout=30, check=True)
            t0 = time.monotonic()
            dropped = self.wait_for_log("ps-server-0", r"worker 2 dropped", KILL_LEASE + 60)
            self.checks.check(f"{name}: the servers drop worker 2 (lease {KILL_LEASE} s)",
                              dropped is not None,
                              f"after {dropped:.1f} s" if dropped is not None
                              else tail(self.logs("ps-server-0")))
            # `docker kill` is a manual stop: Docker does not restart it.
            took, acc = self.finish(name, t0, WORKERS[:2])
            self.checks.figure(f"killed worker (version {version}): dropped "
                               f"{dropped or -1:.1f} s after the kill, the run finished "
                               f"{took:.1f} s after it, test_accuracy {acc}")
        except RuntimeError as e:
            self.checks.check(name, False, str(e))
        finally:
            ok, out = self.down()
            self.checks.check(f"{name}: down -v", ok, "" if ok else tail(out))

    def kill_server(self):
        """Sync mode; ps-server-1's process is killed (SIGKILL from the host,
        a crash, not `docker kill`): Docker restarts it (restart:
        unless-stopped), it restores its checkpoint, the workers bring it to
        their step, and the run completes."""
        env = self.env(PS_MODE="sync", PS_CHECKPOINT_EVERY=50)
        name = "killed server"
        try:
            self.up(env)
            version = self.wait_for_version(80, timeout=180)
            if version < 80:
                raise RuntimeError(f"training did not reach version 80 within 180 s "
                                   f"(at {version}):\n{tail(self.logs(), 30)}")
            cid = self.container("ps-server-1")
            pid = int(run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], timeout=30,
                          check=True).stdout.strip())
            os.kill(pid, signal.SIGKILL)
            t0 = time.monotonic()
            # The workers retry until the shard is at their step again: from
            # a worker's copy, or from the checkpoint alone if it was written
            # at that very step.
            recovered = self.wait_for_log("ps-worker-0", r"went through", 120)
            logs = self.logs("ps-server-1")
            ckpt = re.search(r"shard 1: restored checkpoint \S+ \(version \d+\)", logs)
            forward = re.search(r"shard 1: restored to version \d+ from worker \d+'s copy", logs)
            how = forward.group(0) if forward else "its checkpoint was at the workers' step"
            self.checks.check(f"{name}: Docker restarts it, it restores its checkpoint and the "
                              "workers go on",
                              recovered is not None and ckpt is not None,
                              (ckpt.group(0) if ckpt else "no checkpoint restored") + "; "
                              + (f"worker 0's step went through {recovered:.1f} s after the "
                                 f"kill; {how}" if recovered is not None else tail(logs)))
            took, acc = self.finish(name, t0)
            self.checks.figure(f"killed server (version {version}): "
                               f"{ckpt.group(0) if ckpt else '-'}, worker 0's step went through "
                               f"{recovered or -1:.1f} s after the kill ({how}), the run "
                               f"finished {took:.1f} s after it, test_accuracy {acc}")
        except RuntimeError as e:
            self.checks.check(name, False, str(e))
        finally:
            ok, out = self.down()
            self.checks.check(f"{name}: down -v", ok, "" if ok else tail(out))

    def python_workers(self, python_image):
        """Sync mode, 2 Python workers (docker-compose.python.yml) training
        deploy/python_worker.py with ps.torch over mutual TLS."""
        files = (COMPOSE_FILE, PYTHON_FILE)
        workers = WORKERS[:2]
        env = self.env(PS_MODE="sync", PS_WORKERS=2, PS_PYTHON_IMAGE=python_image)
        name = "python workers"
        t0 = time.monotonic()
        try:
            self.up(env, files=files, services=workers)
            codes = self.wait(workers, timeout=600)
            took = time.monotonic() - t0
            lines = {w: re.search(r"python worker (\d+): mode (\S+), steps (\d+), version (\d+), "
                                  r"samples/s (\d+), test_accuracy ([0-9.]+)", self.logs(w))
                     for w in workers}
            found = {w: m.groups() for w, m in lines.items() if m}
            status = self.ctl("ps-server-0", "status", "reader")
            m = re.search(r'"version":\s*"?(\d+)', status.stdout)
            server_version = int(m.group(1)) if m else None
            ok = (all(c == 0 for c in codes.values()) and len(found) == 2
                  and all(g[0] == w[-1] and g[1] == "sync" and g[2] == g[3]
                          for w, g in found.items())
                  and len({g[2:4] + g[5:] for g in found.values()}) == 1
                  and all(float(g[5]) >= PYTHON_MIN_ACCURACY for g in found.values())
                  and server_version == int(found[workers[0]][3]))
            self.checks.check(
                f"{name}: 2 ps.torch workers exit 0 in step, test accuracy >= "
                f"{PYTHON_MIN_ACCURACY}, the servers at their version", ok,
                f"exit codes {codes}; workers (id, mode, steps, version, samples/s, accuracy) "
                f"{found}; shard 0 at version {server_version}; {took:.1f} s from `up`"
                + ("" if ok else "\n" + tail(self.logs(), 30)))
            self.checks.figure(f"compose python workers: {took:.1f} s (up to the last worker's "
                               f"exit), {found}")
        except RuntimeError as e:
            self.checks.check(name, False, str(e))
        finally:
            ok, out = self.down(files=files)
            self.checks.check(f"{name}: down -v", ok, "" if ok else tail(out))

    def ctl(self, service, command, identity, servers="localhost:50051"):
        """ps_ctl COMMAND inside SERVICE's container, as IDENTITY (a certificate
        of the `certs` volume: reader, admin) or in plaintext (None)."""
        tls = [] if identity is None else [
            "--tls_ca=/certs/ca.pem", f"--tls_cert=/certs/{identity}.pem",
            f"--tls_key=/certs/{identity}.key"]
        return run(["docker", "exec", self.container(service), "ps_ctl", command,
                    f"--servers={servers}", "--timeout=5"] + tls, timeout=30)

    def wait_for_version(self, version, timeout):
        """Polls shard 0's version (ps_ctl status inside its container) until
        it reaches `version` or `timeout` passes; returns the last seen."""
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline:
            p = self.ctl("ps-server-0", "status", "reader")
            m = re.search(r'"version":\s*"?(\d+)', p.stdout)
            seen = int(m.group(1)) if m else seen
            if seen >= version:
                break
            time.sleep(0.5)
        return seen

    def leftovers(self):
        found = {}
        for kind in ("container", "network", "volume"):
            argv = ["docker", kind, "ls", "-q", "--filter",
                    f"label=com.docker.compose.project={PROJECT}"]
            if kind == "container":
                argv.insert(3, "-a")
            ids = run(argv, timeout=30).stdout.split()
            if ids:
                found[kind] = ids
        return found

