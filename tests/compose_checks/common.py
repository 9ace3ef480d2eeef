"""compose_test's shared pieces: the paths and limits of the checks, the
PASS/FAIL tally that prints the `compose_test: PASS|FAIL <name>` lines
.ci/run counts, and running a command from the repository root."""
import os
import subprocess

# tests/compose_checks/common.py -> the repository root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
