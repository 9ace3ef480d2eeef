#!/usr/bin/python3
"""bench.py: Python workers against C++ workers and PyTorch DDP, in one run.

One invocation on one machine runs, one after another:

  ps-python  1 ps_server (sync; 127.0.0.1 on a port the kernel picks, or a
             unix socket with --listen=unix; started as python/server_process.py
             does) and 2 Python workers: the 784-512-256-10 ReLU MLP in torch,
             ps.torch.DistributedOptimizer, batch B per worker.
  ps-cpp     the same server with 2 C++ ps_workers (--model=mlp
             --hidden=512,256 --batch_size=B --threads=T --device=cpu).
  ddp        PyTorch DDP: torch.distributed with gloo, 2 processes, the same
             model and batch B per process, torch.optim.SGD.

All three train on Fashion-MNIST (the IDX .gz files in --dataset_dir, read
with numpy in Python, normalized as worker/mlp/dataset.cc does), each worker
taking its own disjoint batch of every step. Every worker process gets T math
threads (--threads, default 1): torch.set_num_threads(T) and
set_num_interop_threads(1) for the Python workers and DDP, --threads=T
(OpenBLAS) for ps_worker, and OMP/OpenBLAS/MKL_NUM_THREADS=T in every
worker's environment, so each side gets the same cores per worker. DDP's
processes get the glibc malloc setting that ps.torch.DistributedOptimizer
makes (ps.torch.keep_freed_memory), through MALLOC_MMAP_THRESHOLD_ and
MALLOC_TRIM_THRESHOLD_.

What is measured: every worker reports (step, time) every 10 steps (the C++
worker through --metrics_file, the Python ones on stdout). A worker's rate is
(last step - first step >= --warmup) * B / (time between those two reports),
so start-up, connecting, init and the warm-up steps are left out; a config's
figure is the sum over its 2 workers. With --steps N each worker runs
warmup + N steps and exits; with --seconds S the workers run until S seconds
after both have passed the warm-up, and are then stopped.

With --seconds, each row's note also gives every process's CPU time (user +
system, all threads, from /proc) per step over the measured window: on a
machine with few cores the three processes of a ps config share them, so
CPU per step bounds the rate. The Python rows give the share of the loop
spent in forward + backward (for DDP that includes its all-reduce; for the
ps workers the rest is DistributedOptimizer.step(): the push-pull and
loading the weights). --repeat N runs the configs in turn N times and
reports medians, which spreads a shared machine's changing load.

Prints the machine's CPU model and the thread settings, then a table: config,
samples/s, ratio to the C++ workers, ratio to DDP. Exits 1 if any config
failed (its row says FAILED and why). `--quick` (warm-up 10 steps, 2 s per
config) is what //python:bench_test runs.

Run it from the repository root after `bazel build //python:ps
//server:ps_server //worker:ps_worker`: /usr/bin/python3 python/bench.py
--seconds=20. The Python workers and DDP's ranks are python/bench_worker.py
processes.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

from server_process import ServerError, ServerProcess, start_server, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ("ps-python", "ps-cpp", "ddp")
LABELS = {
    "ps-python": "ps_server + 2 Python workers (torch)",
    "ps-cpp": "ps_server + 2 C++ ps_workers",
    "ddp": "PyTorch DDP (gloo, 2 processes)",
}
WORKERS = 2  # per config
REPORT_EVERY = 10  # steps between reports of ps_worker (bench_worker.py: the same)
WORKER_PY = os.path.join(HERE, "bench_worker.py")


class Failed(Exception):
    """A config could not be measured; the message says why."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the driver dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Proc:
    """A child process whose stdout is read by a thread into `lines`. It dies
    with the driver: stop() kills it, and the kernel does if the driver is
    killed."""

    def __init__(self, name: str, argv: List[str], env: Dict[str, str], logdir: str) -> None:
        self.name = name
        self.errpath = os.path.join(logdir, re.sub(r"\W", "_", name) + ".stderr")
        self._err = open(self.errpath, "w")
        self.p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self._err,
                                  text=True, start_new_session=True,
                                  preexec_fn=_die_with_parent)
        self.lines: List[str] = []
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.p.stdout is not None  # stdout=PIPE
        for line in self.p.stdout:
            with self._cv:
                self.lines.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def stderr_tail(self, n: int = 600) -> str:
        self._err.flush()
        with open(self.errpath, errors="replace") as f:
            text = f.read().strip()
        return text[-n:] if text else "(no stderr)"

    def stop(self) -> None:
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._t.join(timeout=5)
        self._err.close()


def python_points(proc: Proc) -> List[Tuple[int, float]]:
    out = []
    for line in list(proc.lines):
        m = re.match(r"progress (\d+) (\S+)", line)
        if m:
            out.append((int(m.group(1)), float(m.group(2))))
    return out


def cpp_points(path: str) -> List[Tuple[int, float]]:
    out = []
    try:
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):  # a complete JSON line
                    r = json.loads(line)
                    out.append((int(r["step"]), float(r["wall_s"])))
    except FileNotFoundError:
        pass
    return out


def worker_rate(points: List[Tuple[int, float]], warmup: int, batch: int, who: str) -> float:
    """Samples/s between the first report at or past `warmup` and the last one."""
    after = [p for p in points if p[0] >= warmup]
    if len(after) < 2 or after[-1][0] <= after[0][0] or after[-1][1] <= after[0][1]:
        raise Failed(f"{who}: too few reports after the warm-up to measure ({points[-3:]})")
    (s0, t0), (s1, t1) = after[0], after[-1]
    return (s1 - s0) * batch / (t1 - t0)


def proc_cpu_s(pid: int) -> Optional[float]:
    """User + system CPU seconds of process `pid` (all its threads), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def worker_env(a: argparse.Namespace) -> Dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(a.threads)
    pypath = os.path.abspath(a.pythonpath)
    env["PYTHONPATH"] = pypath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def start_ps_server(a: argparse.Namespace, logdir: str) -> ServerProcess:
    """The ps configs' server, serving (python/server_process.py's protocol);
    Failed, with its log's tail, if it does not come up."""
    # --listen=unix: a socket in the run's folder, which mkdtemp made 0700.
    listen = f"unix:{logdir}/ps.sock" if a.listen == "unix" else "127.0.0.1:0"
    try:
        flags = [f"--num_workers={WORKERS}", "--mode=sync", f"--lr={a.lr}"]
        return start_server(a.ps_server, flags, logdir=logdir, name="ps_server", listen=listen,
                            timeout=a.start_timeout, start_new_session=True,
                            preexec_fn=_die_with_parent)
    except ServerError as e:
        raise Failed(str(e)) from None


def python_worker_argv(a: argparse.Namespace, role: str, worker_id: int,
                       extra: List[str]) -> List[str]:
    return [sys.executable, "-u", WORKER_PY, f"--role={role}",
            f"--worker_id={worker_id}", f"--batch_size={a.batch_size}", f"--warmup={a.warmup}",
            f"--steps={a.steps}", f"--threads={a.threads}", f"--lr={a.lr}",
            f"--dataset_dir={a.dataset_dir}", f"--seed={a.seed}"] + extra


def run_config(a: argparse.Namespace, config: str, logdir: str) -> Tuple[float, str]:
    """Samples/s summed over the config's workers, and a note (per-worker detail)."""
    server: Optional[ServerProcess] = None
    workers: List[Proc] = []
    # A folder per run: a metrics file left by an earlier run would pass for progress.
    run_dir = tempfile.mkdtemp(prefix=f"{config}-", dir=logdir)
    try:
        env = worker_env(a)
        if config == "ddp":
            # ps.torch.keep_freed_memory()'s malloc setting, as the ps workers get.
            env.update(MALLOC_MMAP_THRESHOLD_=str(32 << 20), MALLOC_TRIM_THRESHOLD_=str(1 << 30))
        if config in ("ps-python", "ps-cpp"):
            server = start_ps_server(a, run_dir)
        addr = server.address if server is not None else ""
        metrics = [os.path.join(run_dir, f"metrics-{w}.jsonl") for w in range(WORKERS)]
        total = a.warmup + a.steps if a.steps > 0 else 0
        cpu_note = ""
        port = free_port() if config == "ddp" else 0
        for w in range(WORKERS):
            if config == "ps-python":
                argv = python_worker_argv(a, "ps_worker", w, [f"--servers={addr}"])
            elif config == "ddp":
                argv = python_worker_argv(a, "ddp_worker", w, [f"--port={port}"])
            else:
                argv = [a.ps_worker, f"--servers={addr}", f"--worker_id={w}",
                        f"--num_workers={WORKERS}", "--model=mlp", "--hidden=512,256",
                        f"--batch_size={a.batch_size}", f"--threads={a.threads}",
                        "--device=cpu", f"--dataset_dir={a.dataset_dir}",
                        f"--log_every={REPORT_EVERY}", f"--metrics_file={metrics[w]}",
                        f"--seed={a.seed}"]
                # --seconds: more epochs than any run reaches; stopped by us.
                argv += [f"--max_steps={total}", "--epochs=1000000"] if total else \
                    ["--epochs=1000000"]
            workers.append(Proc(f"{config} worker {w}", argv, env, run_dir))

        def points() -> List[List[Tuple[int, float]]]:
            if config == "ps-cpp":
                return [cpp_points(m) for m in metrics]
            return [python_points(p) for p in workers]

        def check_alive() -> None:
            if server is not None and server.proc.poll() is not None:
                raise Failed(f"ps_server exited ({server.proc.returncode}): "
                             f"{server.log_tail(600)}")
            for p in workers:
                rc = p.p.poll()
                if rc is not None and rc != 0:
                    raise Failed(f"{p.name} exited ({rc}): {p.stderr_tail()}")

        def warmed_up() -> bool:
            check_alive()
            return all(any(s >= a.warmup for s, _ in pts) for pts in points())

        # Wait for the warm-up of every worker, then measure.
        try:
            wait_until(warmed_up, timeout=a.start_timeout,
                       what=f"{config}: the workers' {a.warmup} warm-up steps")
        except TimeoutError as e:
            raise Failed(str(e)) from None
        if total:
            deadline = time.monotonic() + a.run_timeout
            for wp in workers:
                try:
                    wp.p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise Failed(f"{wp.name}: not done within --run_timeout={a.run_timeout} s")
                if wp.p.returncode != 0:
                    raise Failed(f"{wp.name} exited ({wp.p.returncode}): {wp.stderr_tail()}")
            for wp in workers:
                wp._t.join(timeout=5)
        else:
            # CPU time (user + system, all threads) of every process over
            # the measured seconds, per step of worker 0.
            pids = ([server.proc.pid] if server is not None else []) + [w.p.pid for w in workers]
            cpu0 = [proc_cpu_s(pid) for pid in pids]
            step0 = max(s for s, _ in points()[0])
            end = time.monotonic() + a.seconds
            while time.monotonic() < end:
                check_alive()
                time.sleep(0.05)
            check_alive()
            cpu1 = [proc_cpu_s(pid) for pid in pids]
            steps = max(s for s, _ in points()[0]) - step0
            cpu_note = f"; CPU ms/step: n/a ({steps} steps, cpu {cpu0} -> {cpu1})"
            per = [1e3 * (c1 - c0) / steps for c0, c1 in zip(cpu0, cpu1)
                   if c0 is not None and c1 is not None] if steps > 0 else []
            if per and len(per) == len(pids):
                cpu_note = "; CPU ms/step: workers " + "/".join(
                    f"{x:.1f}" for x in per[-WORKERS:])
                if len(per) > WORKERS:
                    cpu_note += f", server {per[0]:.1f}"
        pts = points()
        rates = [worker_rate(p, a.warmup, a.batch_size, f"{config} worker {w}")
                 for w, p in enumerate(pts)]
        note = "per worker " + " + ".join(f"{r:.0f}" for r in rates)
        if config != "ps-cpp":
            # The Python loop's own split: forward+backward vs. optimizer step.
            fb = []
            for wp in workers:
                last = [l for l in wp.lines if l.startswith("progress ")]
                m = re.search(r"fwd_bwd_s (\S+) step_s (\S+)", last[-1]) if last else None
                if m:
                    f, s = float(m.group(1)), float(m.group(2))
                    fb.append(f"{100 * f / max(1e-9, f + s):.0f}%")
            if fb:
                what = "backward+all-reduce" if config == "ddp" else "fwd+bwd"
                note += f"; {what} share of loop: " + "/".join(fb)
        return sum(rates), note + cpu_note
    finally:
        for p in reversed(workers):
            p.stop()
        if server is not None:
            server.stop()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def print_machine(a: argparse.Namespace) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print(f"machine: {cpu_model()}, {cores} cores usable, load average {load}")
    print(f"threads per worker process: {a.threads} (torch.set_num_threads({a.threads}) and "
          f"set_num_interop_threads(1) for Python workers and DDP; ps_worker --threads="
          f"{a.threads} (OpenBLAS); OMP/OPENBLAS/MKL_NUM_THREADS={a.threads})")
    what = f"{a.steps} steps" if a.steps else f"{a.seconds:g} s"
    print(f"each config: {WORKERS} workers, batch {a.batch_size} per worker, MLP 784-512-256-10, "
          f"warm-up {a.warmup} steps, then {what}; ps configs: 1 sync ps_server --lr={a.lr} "
          f"over {'a unix socket' if a.listen == 'unix' else 'loopback TCP'} "
          f"(a third process on the same cores)")
    sys.stdout.flush()


def print_table(results: Dict[str, Tuple[Optional[float], str]]) -> None:
    cpp = results.get("ps-cpp", (None, ""))[0]
    ddp = results.get("ddp", (None, ""))[0]
    print()
    print(f"{'config':<40} {'samples/s':>10} {'vs C++ workers':>15} {'vs DDP':>8}  note")
    for c in CONFIGS:
        if c not in results:
            continue
        rate, note = results[c]
        if rate is None:
            print(f"{LABELS[c]:<40} {'FAILED':>10} {'-':>15} {'-':>8}  {note}")
            continue
        vc = f"{rate / cpp:.2f}" if cpp else "-"
        vd = f"{rate / ddp:.2f}" if ddp else "-"
        print(f"{LABELS[c]:<40} {rate:>10.0f} {vc:>15} {vd:>8}  {note}")
    sys.stdout.flush()


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None ones (their help says what applies)."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Samples/s of 2 Python workers on a ps_server, 2 C++ ps_workers on a "
                    "ps_server and 2-process PyTorch DDP (gloo), one after another on this "
                    "machine, with the ratios between them. Run from the repository root "
                    "after `bazel build //python:ps //server:ps_server //worker:ps_worker`.",
        formatter_class=_HelpFormatter)
    length = p.add_mutually_exclusive_group()
    length.add_argument("--seconds", type=float, default=None,
                        help="measure each config for this many seconds after the warm-up "
                             "(default: 10; 2 with --quick)")
    length.add_argument("--steps", type=int, default=0,
                        help="measure each config over this many steps per worker after the "
                             "warm-up")
    p.add_argument("--warmup", type=int, default=50,
                   help="steps per worker left out of the measurement")
    p.add_argument("--batch_size", type=int, default=64, help="examples per step per worker")
    p.add_argument("--threads", type=int, default=1,
                   help="math threads per worker process (torch.set_num_threads, "
                        "ps_worker --threads)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the configs in turn this many times and report each one's "
                        "median (spreads a shared machine's changing load over all of them)")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="comma-separated subset of " + ", ".join(CONFIGS))
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: --warmup=10 and, without --steps, --seconds=2 "
                        "(what //python:bench_test runs)")
    p.add_argument("--lr", type=float, default=0.1,
                   help="learning rate (ps_server --lr, DDP's SGD)")
    p.add_argument("--seed", type=int, default=1, help="seed of the data order and init")
    p.add_argument("--listen", choices=("tcp", "unix"), default="tcp",
                   help="the ps configs' server: 127.0.0.1 or a unix socket")
    p.add_argument("--ps_server", default="bazel-bin/server/ps_server",
                   help="the ps_server binary")
    p.add_argument("--ps_worker", default="bazel-bin/worker/ps_worker",
                   help="the ps_worker binary")
    p.add_argument("--pythonpath", default="bazel-bin/python",
                   help="folder holding the built `ps` package (put on the workers' PYTHONPATH)")
    p.add_argument("--dataset_dir", default="/usr/share/datasets/fashion-mnist",
                   help="Fashion-MNIST IDX files (.gz or plain)")
    p.add_argument("--start_timeout", type=float, default=120,
                   help="seconds a config may take to start and finish its warm-up")
    p.add_argument("--run_timeout", type=float, default=600,
                   help="with --steps: seconds the measured steps may take")
    p.add_argument("--keep_logs", action="store_true",
                   help="keep the processes' stderr and metrics files (the folder is printed)")
    a = p.parse_args(argv)
    if a.quick:
        a.warmup = 10
        if a.seconds is None and not a.steps:
            a.seconds = 2.0
    if a.seconds is None:
        a.seconds = 10.0
    if (a.steps < 0 or not a.seconds > 0 or a.warmup < 0 or a.batch_size <= 0 or a.threads <= 0
            or a.repeat <= 0):
        p.error("--steps, --warmup must be >= 0; --seconds, --batch_size, --threads, --repeat > 0")
    configs = [c.strip() for c in a.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        p.error(f"--configs: unknown {unknown}; pick from {', '.join(CONFIGS)}")
    a.configs = configs
    needs = [("--ps_server", a.ps_server, any(c.startswith("ps-") for c in configs)),
             ("--ps_worker", a.ps_worker, "ps-cpp" in configs)]
    for flag, path, needed in needs:
        if needed and not os.access(path, os.X_OK):
            p.error(f"{flag}={path}: not an executable (bazel build //server:ps_server "
                    f"//worker:ps_worker, or pass the path)")
    if "ps-python" in configs and not os.path.isdir(os.path.join(a.pythonpath, "ps")):
        p.error(f"--pythonpath={a.pythonpath}: no ps package there (bazel build //python:ps)")
    return a


def main() -> int:
    a = parse_args()
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so every child is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print_machine(a)
    logdir = tempfile.mkdtemp(prefix="ps_bench_py.")
    results: Dict[str, Tuple[Optional[float], str]] = {}
    runs: Dict[str, List[float]] = {c: [] for c in a.configs}
    for r in range(a.repeat):
        for c in a.configs:
            if c in results and results[c][0] is None:
                continue  # failed once: failed
            print(f"running {c}" + (f" ({r + 1} of {a.repeat})" if a.repeat > 1 else "") + " ...",
                  flush=True)
            try:
                rate, note = run_config(a, c, logdir)
            except Failed as e:
                results[c] = (None, str(e).replace("\n", " | "))
                continue
            runs[c].append(rate)
            if a.repeat > 1:
                note = (f"median of {len(runs[c])} runs: " +
                        ", ".join(f"{x:.0f}" for x in runs[c]) + "; last run " + note)
            results[c] = (statistics.median(runs[c]), note)
    print_table(results)
    if a.keep_logs:
        print(f"logs: {logdir}")
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    return 0 if all(r is not None for r, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
