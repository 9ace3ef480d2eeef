"""server_process: ps_server processes for the Python tests and python/bench.py,
started and waited for in one way.

    server = start_server(BINARY, ["--num_workers=2", ...], logdir=DIR, name="shard0")
    server.address        # 127.0.0.1:PORT (or unix:PATH) as the server wrote it
    server.stop()         # SIGKILL, then reaped

The readiness protocol is the server's --port_file: start_server runs
`BINARY --listen=LISTEN --port_file=FILE FLAGS...` (LISTEN is 127.0.0.1:0,
a port the kernel picks, unless given: an address to restart on, or
unix:PATH) and waits, with a deadline, until FILE holds the address. The
server writes it by rename once it serves, so a reader never sees half of
it. While waiting it checks that the process has not exited; if it has, or
the deadline passes, it raises ServerError with the tail of the server's
log (its stdout and stderr, in LOGDIR/NAME.log).

wait_until(predicate, timeout=..., what=...) is the one bounded polling
loop: the tests' waits for a condition use it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Callable, List, Optional, TypeVar

_T = TypeVar("_T")


class ServerError(RuntimeError):
    """A ps_server did not start; the message holds its log's tail."""


def wait_until(predicate: Callable[[], Optional[_T]], *, timeout: float, what: str,
               interval: float = 0.05) -> _T:
    """Calls `predicate` every `interval` seconds until it returns something
    truthy, and returns that; TimeoutError naming `what` (what was awaited)
    once `timeout` seconds passed. An exception from `predicate` ends the
    wait (e.g. a process that exited)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(min(interval, left))


class ServerProcess:
    """A ps_server started by start_server, serving at `address`."""

    def __init__(self, proc: subprocess.Popen[bytes], address: str, log_path: str) -> None:
        self.proc = proc
        self.address = address
        self.log_path = log_path

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's stdout and stderr."""
        return _tail(self.log_path, chars)

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Sends `sig` (if it still runs) and reaps the process (10 s at most)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: str, chars: int) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read().strip()
    except OSError as e:
        return f"(no log: {e})"
    return text[-chars:] if text else "(empty log)"


def start_server(binary: str, flags: List[str], *, logdir: str, name: str,
                 listen: str = "127.0.0.1:0", timeout: float = 60,
                 **popen: Any) -> ServerProcess:
    """Starts ps_server `binary` with `flags` and waits (up to `timeout`
    seconds) until it serves; see the module's docstring. `popen` goes to
    subprocess.Popen (e.g. start_new_session). The caller stops it."""
    port_file = os.path.join(logdir, f"{name}.port")
    log_path = os.path.join(logdir, f"{name}.log")
    for stale in (port_file, port_file + ".tmp"):
        if os.path.exists(stale):
            os.remove(stale)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([binary, f"--listen={listen}", f"--port_file={port_file}"]
                                + list(flags), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, **popen)

    def address() -> Optional[str]:
        if os.path.exists(port_file):
            with open(port_file) as f:
                return f.read().strip() or None
        if proc.poll() is not None:
            raise ServerError(f"{name} ({binary}) exited with status {proc.returncode} before "
                              f"serving; its log ends:\n{_tail(log_path, 2000)}")
        return None

    try:
        addr = wait_until(address, timeout=timeout, what=f"{name}'s --port_file {port_file}",
                          interval=0.02)
    except TimeoutError as e:
        server = ServerProcess(proc, "", log_path)
        server.stop()
        raise ServerError(f"{e}; its log ends:\n{server.log_tail()}") from None
    except ServerError:
        proc.wait(timeout=10)
        raise
    return ServerProcess(proc, addr, log_path)
