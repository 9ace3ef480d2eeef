#!/usr/bin/python3
"""compose_test: builds deploy/'s images and runs its docker-compose cluster
for real, with deploy/README.md's commands, on this machine's Docker.

    tests/compose_test.py [--data-root=DIR] [--no-cuda] [--no-python] [--sync-only]

What it does, each step a check printed as `compose_test: PASS|FAIL <name>`:
  - installs docker.io and docker-compose with apt when missing;
  - uses a Docker daemon that answers, or starts its own `dockerd` (on a
    private socket and data root) and stops it afterwards by its PID,
    restoring the host's iptables rules, IP forwarding and bridge sysctls as
    it found them and deleting the interfaces it left;
  - deploy/base_image.sh (debian:12 and -slim from the Debian mirror when
    absent), then `DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile`
    cold and again warm (timed), checking the runtime user (10001:10001, no
    useradd warning), that no apt lists or caches are left, and the size;
  - `docker run --rm` of the image (standalone training, accuracy >= 0.80);
  - the compose cluster (2 servers, 3 workers, 1 epoch) in sync and then
    async mode: every worker exits 0, worker 0's final test accuracy is
    >= 0.80, the `model` volume holds finite float32 .npy files with as many
    values as the model has parameters, every worker wrote its metrics;
  - after the sync run, with its servers still up: both serve mutual TLS
    with the health port in plaintext on loopback; ps_ctl in plaintext is
    refused, the reader certificate may read the status but not write a
    checkpoint (PERMISSION_DENIED), the admin one may; the `certs` volume
    holds no CA key and keys of mode 0400 for uid 10001, and is read-only
    like the root filesystem; `run --rm ps-certs` keeps the certificates,
    `run --rm ps-certs --force` replaces them and the running servers accept
    the new CA's certificates without a restart;
  - before those, with the same servers up, the `monitoring` profile:
    `--profile monitoring build prometheus` (deploy/Dockerfile.prometheus:
    runs as 10001:10001, no apt lists or caches, size), `--profile monitoring
    up -d prometheus`; within 120 s http://127.0.0.1:9090/api/v1/targets
    lists exactly the 2 ps-server and 3 ps-worker targets of
    deploy/prometheus/prometheus-compose.yml with both ps-server targets up
    (the workers have exited, so theirs are down: reported, not asserted);
    ps_server_model_version of each server equals the version `ps_ctl
    status` reports; /api/v1/rules holds every alert of
    deploy/prometheus/alerts.yml, none in error; then it is stopped and
    removed;
  - sync mode with worker 2's container killed mid-run: the servers drop it
    once its lease (PS_WORKER_TIMEOUT=3) expires, and the other workers
    finish with accuracy >= 0.80;
  - sync mode with ps-server-1's process killed (SIGKILL from the host):
    Docker restarts it, it restores its newest checkpoint, the workers bring
    it to their step, and every worker finishes with accuracy >= 0.80;
  - Python workers (deploy/docker-compose.python.yml): the Dockerfile's
    python target built on the same build cache (timed, sized), then sync
    mode with 2 workers running deploy/python_worker.py (ps.torch): both
    exit 0 after the same number of steps, each at server version = steps,
    with the same test accuracy (>= 0.75), and the servers' version is that
    step count;
  - `down -v` after each run; at the end no container, network or volume of
    the test's compose project is left, nor any image it built;
  - the CUDA image (deploy/base_image.sh --cuda from this machine's toolkit,
    then deploy/Dockerfile.cuda): `ps_worker --device=auto` falls back to
    the CPU and says why (no GPU here), `--device=cuda` fails saying why;
    the GPU override (docker-compose.gpu.yml) is checked with `config`.

The compose command is `docker-compose` (Debian 12's v1) when installed,
else `docker compose` (v2); PS_COMPOSE overrides it. Where the docker CLI on
PATH cannot use BuildKit (a CLI of 23 or later without the buildx plugin, as
on this project's machines next to docker.io's 20.10 daemon), docker.io's own
/usr/bin/docker is put first on PATH.

Skips, with the reason and exit status 77, where Docker cannot run: not
root (needed to install Docker and start dockerd), or a dockerd that does not
come up (no kernel support). Otherwise exits 0 when every check passed, else
1. The last line is `compose_test: N passed, N failed`.

--data-root=DIR: with a dockerd of its own, keep its images and build cache
in DIR between runs (for development; the default is a temporary directory,
deleted at the end). --no-cuda: leave the CUDA image out. --no-python:
leave the Python workers out. --sync-only (for development): after the cold
image build, only the sync cluster with its monitoring and security checks.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE_FILE = "deploy/docker-compose.yml"
GPU_FILE = "deploy/docker-compose.gpu.yml"
PYTHON_FILE = "deploy/docker-compose.python.yml"
ALERTS_FILE = "deploy/prometheus/alerts.yml"
PROMETHEUS_CONFIG = "deploy/prometheus/prometheus-compose.yml"
PROMETHEUS_API = "http://127.0.0.1:9090/api/v1/"  # the compose file's loopback port
PROMETHEUS_WAIT = 120  # s: Prometheus up and both servers scraped (every 15 s)
PYTHON_MIN_ACCURACY = 0.75  # deploy/python_worker.py, 1 epoch, 2 workers: 0.806 seen
PROJECT = "pscomposetest"  # -p: never deploy/README.md's `ps` project of a user
WORKERS = ["ps-worker-0", "ps-worker-1", "ps-worker-2"]
MIN_ACCURACY = 0.80
KILL_LEASE = 3  # s: PS_WORKER_TIMEOUT of the killed-worker run


class Skip(Exception):
    pass


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        tail = f": {detail}" if detail else ""
        print(f"compose_test: {'PASS' if ok else 'FAIL'} {name}{tail}", flush=True)
        return ok

    def figure(self, text):
        print(f"compose_test: figure: {text}", flush=True)


def log(msg):
    print(f"compose_test: {msg}", flush=True)


def run(argv, timeout=600, check=False, env=None, **kw):
    """Runs argv; returns CompletedProcess with text stdout+stderr merged."""
    try:
        p = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        p = subprocess.CompletedProcess(argv, 124, out + f"\n[timed out after {timeout} s]")
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout[-3000:]}")
    return p


def tail(text, n=15):
    return "\n".join(text.strip().splitlines()[-n:])


# --- installing and choosing the tools ---------------------------------------
def install_docker():
    need = [pkg for cmd, pkg in (("dockerd", "docker.io"), ("docker-compose", "docker-compose"))
            if shutil.which(cmd) is None]
    if shutil.which("docker-compose") is not None or (shutil.which("docker") and subprocess.run(
            ["docker", "compose", "version"], capture_output=True).returncode == 0):
        need = [p for p in need if p != "docker-compose"]
    if not need:
        return
    log(f"installing {' '.join(need)} with apt")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + need
    if run(cmd, env=env).returncode != 0:
        run(["apt-get", "update", "-qq"], env=env)
        p = run(cmd, env=env)
        if p.returncode != 0:
            raise Skip(f"cannot install {' '.join(need)}: {tail(p.stdout, 5)}")


def choose_docker_cli():
    """Puts a docker CLI that can use BuildKit first on PATH; returns its path."""
    cli = shutil.which("docker")
    if cli is None:
        raise Skip("no docker CLI after installing docker.io")
    version = run([cli, "version", "--format", "{{.Client.Version}}"], timeout=30).stdout
    major = int(re.match(r"\s*(\d+)", version).group(1)) if re.match(r"\s*\d+", version) else 0
    has_buildx = run([cli, "buildx", "version"], timeout=30).returncode == 0
    if major >= 23 and not has_buildx and os.path.realpath(cli) != "/usr/bin/docker" \
            and os.access("/usr/bin/docker", os.X_OK):
        log(f"{cli} (client {version.strip()}) has no buildx, so it cannot build with BuildKit; "
            "using docker.io's /usr/bin/docker")
        os.environ["PATH"] = "/usr/bin:" + os.environ["PATH"]
        cli = "/usr/bin/docker"
    return cli


def choose_compose():
    if os.environ.get("PS_COMPOSE"):
        return os.environ["PS_COMPOSE"].split()
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return ["docker", "compose"]


# --- the daemon -------------------------------------------------------------
def sysctl_paths():
    return ["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"] + \
        sorted(glob.glob("/proc/sys/net/bridge/bridge-nf-call-*"))


def read(path):
    with open(path) as f:
        return f.read()


def iptables_tables(dump):
    """{table: (policies, rules)} of an iptables-save dump, without counters;
    a table with only built-in chains, ACCEPT policies and no rules is left
    out: it filters nothing, exactly like an absent table."""
    tables, name = {}, None
    for line in dump.splitlines():
        if line.startswith("*"):
            name, chains, rules = line[1:], [], []
        elif name and line.startswith(":"):
            chain, policy = line[1:].split()[:2]
            chains.append((chain, policy))
        elif name and line.startswith("-"):
            rules.append(line)
        elif name and line == "COMMIT":
            if rules or any(p not in ("ACCEPT",) for _, p in chains):
                tables[name] = (sorted(chains), rules)
            name = None
    return tables


class HostNetState:
    """iptables/ip6tables rules, forwarding and bridge sysctls, links."""

    def __init__(self):
        self.dumps = {}
        for tool in ("iptables", "ip6tables"):
            if shutil.which(f"{tool}-save"):
                self.dumps[tool] = run([f"{tool}-save"], timeout=30).stdout
        self.sysctls = {p: read(p) for p in sysctl_paths() if os.path.exists(p)}
        self.links = self.link_names()

    @staticmethod
    def link_names():
        out = run(["ip", "-o", "link", "show"], timeout=30).stdout
        return {l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if ":" in l}

    def restore(self):
        problems = []
        for tool, before in self.dumps.items():
            saved = iptables_tables(before)
            now = run([f"{tool}-save"], timeout=30).stdout
            for table in re.findall(r"^\*(\S+)", now, re.M):
                if table in saved:
                    continue
                run([tool, "-t", table, "-F"], timeout=30)
                run([tool, "-t", table, "-X"], timeout=30)
                for chain, policy in re.findall(r"^:(\S+) (\S+)", run(
                        [f"{tool}-save", "-t", table], timeout=30).stdout, re.M):
                    if policy != "-":
                        run([tool, "-t", table, "-P", chain, "ACCEPT"], timeout=30)
            if saved:
                run([f"{tool}-restore"], input=before, timeout=30)
            after = iptables_tables(run([f"{tool}-save"], timeout=30).stdout)
            if after != saved:
                problems.append(f"{tool} rules differ after restoring: {sorted(after)} vs "
                                f"{sorted(saved)}")
        for path, value in self.sysctls.items():
            try:
                with open(path, "w") as f:
                    f.write(value)
            except OSError as e:
                problems.append(f"cannot restore {path}: {e}")
            if read(path) != value:
                problems.append(f"{path} is {read(path).strip()}, was {value.strip()}")
        for link in sorted(self.link_names() - self.links):
            run(["ip", "link", "delete", link], timeout=30)
        left = self.link_names() - self.links
        if left:
            problems.append(f"interfaces left: {sorted(left)}")
        return problems


class OwnDaemon:
    """A dockerd of the test's own, on a private socket and data root."""

    def __init__(self, data_root):
        self.tmp = tempfile.mkdtemp(prefix="ps-dockerd.")
        self.keep_data = data_root is not None
        self.data_root = data_root or os.path.join(self.tmp, "data")
        self.socket = os.path.join(self.tmp, "docker.sock")
        self.log_path = os.path.join(self.tmp, "dockerd.log")
        self.net = HostNetState()
        os.makedirs(self.data_root, exist_ok=True)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["dockerd", f"--data-root={self.data_root}",
             f"--exec-root={os.path.join(self.tmp, 'exec')}",
             f"--pidfile={os.path.join(self.tmp, 'docker.pid')}",
             f"--host=unix://{self.socket}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        os.environ["DOCKER_HOST"] = f"unix://{self.socket}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if run(["docker", "info"], timeout=10).returncode == 0:
                log(f"started dockerd (pid {self.proc.pid}) on {self.socket}, data root "
                    f"{self.data_root}")
                return
            time.sleep(0.5)
        why = tail(read(self.log_path), 10)
        self.stop()
        raise Skip(f"dockerd does not come up (no kernel support?):\n{why}")

    def stop(self):
        """Stops dockerd by its PID; returns the problems found restoring."""
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                problems.append("dockerd did not stop within 60 s of SIGTERM; killed")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:  # its containerd and shims, if any outlived it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log.close()
        os.environ.pop("DOCKER_HOST", None)
        problems += self.net.restore()
        mounts = [l.split()[1] for l in read("/proc/mounts").splitlines()
                  if l.split()[1].startswith(self.tmp) or l.split()[1].startswith(self.data_root)]
        for m in sorted(mounts, reverse=True):
            run(["umount", "-l", m], timeout=30)
        if not self.keep_data:
            shutil.rmtree(self.data_root, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if os.path.exists(self.tmp) or (not self.keep_data and os.path.exists(self.data_root)):
            problems.append(f"could not delete {self.tmp}")
        return problems


# --- the cluster ------------------------------------------------------------
class Cluster:
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

    def check_monitoring(self, env):
        """With the cluster of a finished sync run still up: the `monitoring`
        profile's Prometheus built and started with the compose file's own
        commands, scraping the servers over mutual TLS and loading the alert
        rules; stopped and removed at the end, whatever happened."""
        name = "monitoring"
        monitoring = ("--profile", "monitoring")
        t0 = time.monotonic()
        p = run(self.cmd(*monitoring, "build", "prometheus"), env=env, timeout=900)
        took = time.monotonic() - t0
        size = image_size(self.prometheus_image)
        if not self.checks.check(f"{name}: --profile monitoring build prometheus",
                                 p.returncode == 0 and size is not None,
                                 f"{took:.0f} s, {size or 0:.0f} MB" if p.returncode == 0
                                 else tail(p.stdout, 25)):
            return
        self.checks.figure(f"prometheus image build: {took:.0f} s, size {size:.0f} MB")
        check_runtime_image(self.checks, self.prometheus_image, "prometheus image",
                            entrypoint="sh")
        try:
            p = run(self.cmd(*monitoring, "up", "-d", "prometheus"), env=env, timeout=300)
            if not self.checks.check(f"{name}: --profile monitoring up -d prometheus",
                                     p.returncode == 0, tail(p.stdout, 3)):
                return
            self.check_prometheus(name)
        except (OSError, ValueError, KeyError, TypeError) as e:  # the API's answers
            self.checks.check(name, False, f"{type(e).__name__}: {e}")
        finally:
            p = run(self.cmd(*monitoring, "rm", "-f", "-s", "prometheus"), env=env, timeout=120)
            left = self.container("prometheus")
            self.checks.check(f"{name}: prometheus stopped and removed",
                              p.returncode == 0 and left is None,
                              "" if p.returncode == 0 and left is None
                              else f"container {left}: {tail(p.stdout, 3)}")

    def check_prometheus(self, name):
        """The targets, ps_server_model_version and the rules, through
        Prometheus's HTTP API on the host's loopback."""
        import yaml
        with open(os.path.join(ROOT, PROMETHEUS_CONFIG)) as f:
            config = yaml.safe_load(f)
        configured = {(job["job_name"], t) for job in config["scrape_configs"]
                      for sc in job["static_configs"] for t in sc["targets"]}
        servers = sorted(t for job, t in configured if job == "ps-server")
        t0 = time.monotonic()
        targets, why = {}, ""
        while time.monotonic() - t0 < PROMETHEUS_WAIT:
            try:
                active = prometheus_api("targets")["activeTargets"]
                targets = {(t["labels"]["job"], t["labels"]["instance"]):
                           (t["health"], t.get("lastError", "")) for t in active}
                if all(targets.get(("ps-server", s), ("",))[0] == "up" for s in servers):
                    break
            except (OSError, ValueError) as e:  # not listening yet
                why = f"{type(e).__name__}: {e}"
            time.sleep(2)
        waited = time.monotonic() - t0
        up = all(targets.get(("ps-server", s), ("",))[0] == "up" for s in servers)
        self.checks.check(
            f"{name}: /api/v1/targets lists the {len(configured)} configured targets, both "
            f"ps-server targets up (the exited workers' are not asserted)",
            set(targets) == configured and up,
            f"after {waited:.1f} s: " + ("; ".join(
                f"{job} {inst} {health}" + (f" ({err[:80]})" if err and health != "up" else "")
                for (job, inst), (health, err) in sorted(targets.items())) or why or "none")
            + ("" if set(targets) == configured else f"; configured: {sorted(configured)}"))

        # The servers' versions: Prometheus's last scrape against ps_ctl
        # status (training has finished, so neither moves).
        status = self.ctl("ps-server-0", "status", "reader", ",".join(
            s.replace(":9100", ":50051") for s in servers))
        versions = {}
        for line in status.stdout.splitlines():
            if line.startswith("{"):
                reply = json.loads(line)
                versions[reply["server"].split(":")[0]] = int(reply["version"])
        result = prometheus_api("query?query=ps_server_model_version")["result"]
        scraped = {r["metric"]["instance"].split(":")[0]: int(float(r["value"][1]))
                   for r in result if r["metric"].get("job") == "ps-server"}
        self.checks.check(
            f"{name}: ps_server_model_version equals each server's version in ps_ctl status",
            status.returncode == 0 and len(versions) == len(servers) and scraped == versions
            and all(v > 0 for v in versions.values()),
            f"Prometheus {scraped}; ps_ctl status {versions}"
            + ("" if status.returncode == 0 else f"; ps_ctl: {tail(status.stdout, 2)}"))

        with open(os.path.join(ROOT, ALERTS_FILE)) as f:
            alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]
                      if "alert" in r}
        rules = [r for g in prometheus_api("rules")["groups"] for r in g["rules"]]
        loaded = {r["name"] for r in rules if r.get("type") == "alerting"}
        errors = {r["name"]: r.get("lastError", "") for r in rules if r.get("health") == "err"}
        self.checks.check(
            f"{name}: /api/v1/rules holds every alert of {ALERTS_FILE}, none in error",
            alerts and loaded == alerts and not errors,
            f"{len(loaded)} alerting rules loaded, {len(alerts)} in the file"
            + (f"; missing {sorted(alerts - loaded)}" if alerts - loaded else "")
            + (f"; extra {sorted(loaded - alerts)}" if loaded - alerts else "")
            + (f"; in error: {errors}" if errors else ""))

    def ctl(self, service, command, identity, servers="localhost:50051"):
        """ps_ctl COMMAND inside SERVICE's container, as IDENTITY (a certificate
        of the `certs` volume: reader, admin) or in plaintext (None)."""
        tls = [] if identity is None else [
            "--tls_ca=/certs/ca.pem", f"--tls_cert=/certs/{identity}.pem",
            f"--tls_key=/certs/{identity}.key"]
        return run(["docker", "exec", self.container(service), "ps_ctl", command,
                    f"--servers={servers}", "--timeout=5"] + tls, timeout=30)

    def check_security(self):
        """With the cluster of a finished run still up: mutual TLS is on, the
        identities decide what a client may do, the certificates' volume is
        as deploy/docker-compose.yml says, and a rerun of ps-certs --force
        rotates every certificate without a restart."""
        name = "security"
        logs = self.logs("ps-server-0", "ps-server-1")
        modes = re.findall(r"security: ([^\n]*)", logs)
        self.checks.check(f"{name}: both servers serve mutual TLS, health in plaintext on loopback",
                          len(modes) == 2 and all(m.startswith("mutual TLS; health probes "
                                                               "(plaintext) on 127.0.0.1:8081")
                                                  for m in modes), f"{modes}")
        plain = self.ctl("ps-server-0", "status", None)
        reader = self.ctl("ps-server-0", "status", "reader", "ps-server-0:50051,ps-server-1:50051")
        reader_ckpt = self.ctl("ps-server-0", "checkpoint", "reader")
        admin_ckpt = self.ctl("ps-server-0", "checkpoint", "admin")
        self.checks.check(
            f"{name}: plaintext refused; reader may read the status but not checkpoint; admin may",
            plain.returncode != 0 and reader.returncode == 0 and '"version"' in reader.stdout
            and reader_ckpt.returncode != 0 and "PERMISSION_DENIED" in reader_ckpt.stdout
            and admin_ckpt.returncode == 0,
            f"plaintext: exit {plain.returncode} {tail(plain.stdout, 1)}; reader status: exit "
            f"{reader.returncode}; reader checkpoint: exit {reader_ckpt.returncode} "
            f"{tail(reader_ckpt.stdout, 1)}; admin checkpoint: exit {admin_ckpt.returncode} "
            f"{tail(admin_ckpt.stdout, 1)}")
        # The volume: keys only for uid 10001, no CA key; mounted read-only;
        # the root filesystem read-only too.
        server = self.container("ps-server-0")
        listing = run(["docker", "exec", server, "sh", "-c",
                       "cd /certs && stat -c '%n %u:%g %a' *"], timeout=30).stdout.split("\n")
        files = dict(l.split(" ", 1) for l in listing if l.count(" ") == 2)
        keys = {n: v for n, v in files.items() if n.endswith(".key")}
        writes = run(["docker", "exec", server, "sh", "-c",
                      "touch /certs/x 2>&1; touch /x 2>&1; touch /tmp/x && echo tmp-ok"],
                     timeout=30).stdout
        self.checks.check(
            f"{name}: certs volume: keys 0400 of 10001:10001, no ca.key, read-only; root "
            f"filesystem read-only, /tmp writable",
            "ca.pem" in files and "ca.key" not in files and len(keys) >= 7
            and all(v == "10001:10001 400" for v in keys.values())
            and writes.count("Read-only file system") == 2 and "tmp-ok" in writes,
            f"{len(files)} files, keys {sorted(set(keys.values()))}; writes: "
            f"{' | '.join(writes.split(chr(10)))}")
        # ps-certs again: keeps the certificates; with --force, a new CA and
        # certificates, which the running servers pick up.
        def ca_digest():
            return run(["docker", "exec", server, "sha256sum", "/certs/ca.pem"],
                       timeout=30).stdout.split()[:1]
        started = {s: run(["docker", "inspect", "-f", "{{.State.StartedAt}}", self.container(s)],
                          timeout=30).stdout.strip() for s in ("ps-server-0", "ps-server-1")}
        before = ca_digest()
        keep = run(self.cmd("run", "--rm", "-T", "ps-certs"), env=self.env(), timeout=120,
                   stdin=subprocess.DEVNULL)
        kept = ca_digest()
        rotate = run(self.cmd("run", "--rm", "-T", "ps-certs", "--force"), env=self.env(),
                     timeout=120, stdin=subprocess.DEVNULL)
        rotated = ca_digest()
        t0 = time.monotonic()
        ok = None
        while time.monotonic() - t0 < 40:  # the servers re-read every 10 s
            p = self.ctl("ps-server-0", "status", "reader", "ps-server-0:50051,ps-server-1:50051")
            if p.returncode == 0:
                ok = time.monotonic() - t0
                break
            time.sleep(1)
        after = {s: run(["docker", "inspect", "-f", "{{.State.StartedAt}}", self.container(s)],
                        timeout=30).stdout.strip() for s in ("ps-server-0", "ps-server-1")}
        self.checks.check(
            f"{name}: ps-certs keeps the certificates; ps-certs --force rotates them and the "
            f"running servers accept the new ones without a restart",
            keep.returncode == 0 and before == kept and rotate.returncode == 0
            and rotated != before and ok is not None and after == started,
            f"keep: exit {keep.returncode}, CA {'unchanged' if before == kept else 'changed'}; "
            f"--force: exit {rotate.returncode}, CA {'new' if rotated != before else 'unchanged'}; "
            + (f"status with the new reader certificate {ok:.1f} s later" if ok is not None
               else f"status still failing after 40 s: {tail(p.stdout, 2)}")
            + ("" if after == started else f"; servers restarted: {started} -> {after}")
            + ("" if rotate.returncode == 0 else "\n" + tail(rotate.stdout, 5)))
        if ok is not None:
            self.checks.figure(f"certificate rotation: the servers accepted the new CA's "
                               f"certificates {ok:.1f} s after ps-certs --force")

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


# --- the steps --------------------------------------------------------------
def image_size(image):
    p = run(["docker", "image", "inspect", "-f", "{{.Size}}", image], timeout=30)
    return int(p.stdout) / 1e6 if p.returncode == 0 else None


def build_image(checks, dockerfile, image, name, target=None):
    """deploy/README.md's build command; returns its wall time, or None."""
    argv = ["docker", "build", "-f", dockerfile, "-t", image, "."]
    if target:
        argv[4:4] = [f"--target={target}"]
    t0 = time.monotonic()
    p = run(argv, env=dict(os.environ, DOCKER_BUILDKIT="1"), timeout=1800)
    took = time.monotonic() - t0
    warnings = [l for l in p.stdout.splitlines() if re.search(r"useradd.*warning", l, re.I)]
    ok = p.returncode == 0 and not warnings
    checks.check(f"{name}: DOCKER_BUILDKIT=1 docker build -f {dockerfile}"
                 + (f" --target={target}" if target else ""), ok,
                 f"{took:.0f} s, {image_size(image) or 0:.0f} MB" if ok
                 else tail(p.stdout, 25) + "\n" + "\n".join(warnings))
    return took if ok else None


def prometheus_api(path):
    """The `data` of a Prometheus HTTP API answer (PROMETHEUS_API + path)."""
    with urllib.request.urlopen(PROMETHEUS_API + path, timeout=10) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        raise ValueError(f"{path}: {answer}")
    return answer["data"]


def check_runtime_image(checks, image, name="image", entrypoint=None):
    """The image's user and apt leftovers; `entrypoint`: a shell to run them
    with, for an image whose ENTRYPOINT is not one (prometheus)."""
    first = [f"--entrypoint={entrypoint}"] if entrypoint else []
    ids = run(["docker", "run", "--rm"] + first + [image] + ([] if entrypoint else ["sh"])
              + ["-c", "id -u; id -g"], timeout=120)
    # As root, to see into apt's private directories; empty files (apt's
    # lock) are no cache.
    find = "find /var/lib/apt/lists /var/cache/apt -type f -size +0c"
    apt = run(["docker", "run", "--rm", "--user=0"] + first + [image]
              + (["-c", find] if entrypoint else find.split()), timeout=120)
    checks.check(f"{name}: runs as 10001:10001 with no apt lists or caches",
                 ids.stdout.split() == ["10001", "10001"] and apt.returncode == 0
                 and not apt.stdout.split(),
                 f"uid, gid: {ids.stdout.split()}; apt files: {apt.stdout.split() or 'none'}")


def standalone(checks, image):
    t0 = time.monotonic()
    p = run(["docker", "run", "--rm", image], timeout=600)
    m = re.search(r"final test_accuracy ([0-9.]+)", p.stdout)
    acc = float(m.group(1)) if m else None
    checks.check("docker run --rm (standalone, 1 epoch)",
                 p.returncode == 0 and acc is not None and acc >= MIN_ACCURACY,
                 f"exit {p.returncode}, test_accuracy {acc}, {time.monotonic() - t0:.1f} s")


def cuda_image(checks, cluster, image):
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    if not os.access(os.path.join(cuda, "bin", "nvcc"), os.X_OK):
        checks.check("cuda image", False, f"no CUDA toolkit at {cuda} (set CUDA_PATH, or --no-cuda)")
        return
    p = run(["deploy/base_image.sh", "--cuda"], timeout=900)
    if not checks.check("deploy/base_image.sh --cuda", p.returncode == 0, tail(p.stdout, 5)):
        return
    if build_image(checks, "deploy/Dockerfile.cuda", image, "cuda image") is None:
        return
    p = run(["docker", "run", "--rm", image, "ps_worker", "--standalone", "--device=auto",
             "--max_steps=50"], timeout=300)
    first = next((l for l in p.stdout.splitlines() if l.startswith("worker 0/1:")), "")
    checks.check("cuda image: ps_worker --device=auto falls back to the CPU and says why",
                 p.returncode == 0 and re.search(r"on cpu .*; auto: \S.*", first) is not None,
                 first or tail(p.stdout, 5))
    p = run(["docker", "run", "--rm", image, "ps_worker", "--standalone", "--device=cuda",
             "--max_steps=1"], timeout=300)
    checks.check("cuda image: ps_worker --device=cuda fails and says why",
                 p.returncode != 0 and "no CUDA device" in p.stdout, tail(p.stdout, 1))

    # The GPU override, as compose resolves it.
    import yaml
    p = run(cluster.cmd("config", files=(COMPOSE_FILE, GPU_FILE)),
            env=cluster.env(PS_CUDA_IMAGE=image), timeout=60)
    problems = []
    if p.returncode != 0:
        problems.append(tail(p.stdout, 5))
    else:
        services = yaml.safe_load(p.stdout)["services"]
        for s in WORKERS:
            svc = services.get(s, {})
            devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get(
                "devices", [])
            if svc.get("image") != image or "--device=cuda" not in svc.get("command", []) or \
                    not any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])
                            and int(d.get("count", 0)) == 1 for d in devices):
                problems.append(f"{s}: {json.dumps(svc)[:300]}")
        for s in ("ps-server-0", "ps-server-1"):
            if services.get(s, {}).get("image") != cluster.image:
                problems.append(f"{s} runs {services.get(s, {}).get('image')}, not the CPU image")
    checks.check(f"compose config with {GPU_FILE}", not problems, "; ".join(problems) or
                 "each worker: the CUDA image, --device=cuda, one nvidia GPU reserved")


OUR_REPOSITORIES = ("debian", "ps", "ps-python", "ps-prometheus", "ps-cuda", "ps-cuda-devel",
                    "ps-cuda-runtime")


def image_tags():
    out = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], timeout=30).stdout
    return {t for t in out.split() if t.split(":")[0] in OUR_REPOSITORIES}


def setup(args):
    """Root, Docker installed, a daemon: (compose argv, OwnDaemon or None)."""
    if os.geteuid() != 0:
        raise Skip("needs root (to install Docker and start dockerd)")
    install_docker()
    cli = choose_docker_cli()
    compose = choose_compose()
    daemon = None
    if run(["docker", "info"], timeout=30).returncode == 0:
        log("using the Docker daemon that answers")
    else:
        daemon = OwnDaemon(args.data_root)
    versions = run(["docker", "version", "--format",
                    "client {{.Client.Version}}, server {{.Server.Version}}"], timeout=30)
    compose_version = run(compose + ["version", "--short"], timeout=30).stdout.strip()
    log(f"docker: {cli} ({versions.stdout.strip()}); compose: {' '.join(compose)} "
        f"{compose_version}")
    return compose, daemon


def python_image(checks, cluster, image):
    """The Dockerfile's python target (timed: the Python workers' extra build
    time), what it holds, and 2 Python workers in compose."""
    took = build_image(checks, "deploy/Dockerfile", image, "python image", target="python")
    if took is None:
        return
    p = run(["docker", "run", "--rm", image, "python3", "-c",
             "import ps, ps.torch, torch; print(ps.__file__, torch.__version__)"], timeout=120)
    checks.check("python image: ps and ps.torch import, from /usr/local",
                 p.returncode == 0 and "/usr/local/lib/python3" in p.stdout,
                 tail(p.stdout, 3))
    checks.figure(f"python image build: {took:.0f} s after the default image, size "
                  f"{image_size(image) or 0:.0f} MB")
    cluster.python_workers(image)


def run_checks(checks, args, compose, image, cuda_image_tag):
    t0 = time.monotonic()
    p = run(["deploy/base_image.sh"], timeout=900)
    if not checks.check("deploy/base_image.sh", p.returncode == 0, tail(p.stdout, 5)):
        return
    checks.figure(f"base images: {time.monotonic() - t0:.0f} s")

    cold = build_image(checks, "deploy/Dockerfile", image, "image")
    if cold is None:
        return
    if args.sync_only:
        Cluster(compose, image, checks).train("sync", build=True)
        return
    warm = build_image(checks, "deploy/Dockerfile", image, "image (warm)")
    checks.figure(f"image build: cold {cold:.0f} s, warm {warm or 0:.0f} s, "
                  f"size {image_size(image):.0f} MB")
    check_runtime_image(checks, image)
    standalone(checks, image)

    cluster = Cluster(compose, image, checks)
    cluster.train("sync", build=True)
    cluster.train("async", build=False)
    cluster.kill_worker()
    cluster.kill_server()
    if not args.no_python:
        python_image(checks, cluster, image.replace("ps:", "ps-python:", 1))
    if not args.no_cuda:
        cuda_image(checks, cluster, cuda_image_tag)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", help="a dockerd of the test's own keeps its data here "
                    "(images, build cache) between runs")
    ap.add_argument("--no-cuda", action="store_true", help="leave the CUDA image out")
    ap.add_argument("--no-python", action="store_true", help="leave the Python workers out")
    ap.add_argument("--sync-only", action="store_true", help="for development: after the cold "
                    "build, only the sync cluster with its monitoring and security checks")
    args = ap.parse_args()

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    t_start = time.monotonic()
    try:
        compose, daemon = setup(args)
    except Skip as e:
        print(f"compose_test: SKIPPED: {e}", flush=True)
        sys.exit(77)

    checks = Checks()
    # A daemon of our own gets deploy/README.md's tags; someone else's, this run's.
    suffix = "latest" if daemon else f"compose-test-{os.getpid()}"
    tags_before = image_tags()
    try:
        run_checks(checks, args, compose, f"ps:{suffix}", f"ps-cuda:{suffix}")
    except KeyboardInterrupt as e:
        checks.check("run", False, f"interrupted ({e})")
    except Exception as e:  # a bug of the test, or a tool that failed outright
        checks.check("run", False, f"{type(e).__name__}: {e}")
    finally:
        left = Cluster(compose, "", checks).leftovers()
        # Images this run made; a daemon of our own with --data-root keeps
        # them for the next run (its data root is otherwise deleted).
        made = sorted(image_tags() - tags_before)
        if not (daemon and daemon.keep_data):
            for tag in made:
                run(["docker", "image", "rm", "-f", tag], timeout=120)
            left_images = sorted(image_tags() & set(made))
            if left_images:
                left["image"] = left_images
        checks.check("nothing left behind (containers, networks, volumes, images)", not left,
                     f"left: {left}" if left else
                     f"project {PROJECT}: no containers, networks or volumes; images "
                     f"{'kept in --data-root' if daemon and daemon.keep_data else 'removed'}: "
                     f"{made}")
        if daemon:
            problems = daemon.stop()
            checks.check("dockerd stopped; iptables, forwarding and interfaces restored",
                         not problems, "; ".join(problems))
    checks.figure(f"compose_test total: {time.monotonic() - t_start:.0f} s")
    print(f"compose_test: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(0 if checks.failed == 0 else 1)


if __name__ == "__main__":
    main()
