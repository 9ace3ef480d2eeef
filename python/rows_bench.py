#!/usr/bin/python3
"""rows_bench.py: the Python package's cost per embedding-rows call over the
C++ client's, in one run.

One ps_server (async, --sparse_optimizer=sgd; started as
python/server_process.py does, on 127.0.0.1 or with --listen=unix a unix
socket) and one ps.Client. A pool of --pool_rows ids, uniform over
[0, --id_space), is cut into requests of K distinct sorted ids (K =
--ids, default 1000) and every row is created before timing. Then, for
each op (pull_rows, push_rows, push_pull_rows), --rounds rounds of about
2 x --seconds make each request twice, once each way:
  C++      straight from C++ (the extension's _time_rows, which times a call
           of PsClient as a C++ program makes it, on the same thread,
           connection and server);
  Python   ps.Client.pull_rows / push_rows / push_pull_rows, with `out` given.
The two ways alternate call by call, each first in every other pair, so
that a shared machine's changing load falls on both alike. Prints per op
the median of each and the Python overhead: the median over the pairs of
Python - C++ (microseconds a call), and the ratio of the medians. Exits 1
on any error. `--quick` (0.3 s, 1 round, a 20,000-row pool) is what
//python:rows_bench_test runs.

Run from the repository root after `bazel build //python:ps
//server:ps_server`: /usr/bin/python3 python/rows_bench.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

import numpy as np
from numpy.typing import NDArray

OPS = ("pull", "push", "push_pull")


def requests(pool_rows: int, k: int, id_space: int, seed: int) -> List[NDArray[np.uint64]]:
    """max(1, pool_rows // k) requests of k distinct sorted uint64 ids."""
    rng = np.random.default_rng(seed)
    return [np.sort(rng.choice(id_space, size=k, replace=False)).astype(np.uint64)
            for _ in range(max(1, pool_rows // k))]


def python_call(client: Any, op: str, ids: NDArray[np.uint64], grads: NDArray[np.float32],
                out: NDArray[np.float32]) -> Callable[[], object]:
    if op == "pull":
        return lambda: client.pull_rows("rows", ids, out=out)
    if op == "push":
        return lambda: client.push_rows("rows", ids, grads)
    return lambda: client.push_pull_rows("rows", ids, grads, out=out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ps_server", default="bazel-bin/server/ps_server")
    p.add_argument("--pythonpath", default="bazel-bin/python",
                   help="where the built ps package is (bazel build //python:ps)")
    p.add_argument("--listen", default="tcp", choices=["tcp", "unix"])
    p.add_argument("--ids", type=int, default=1000, help="K: distinct ids a request")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--pool_rows", type=int, default=200_000)
    p.add_argument("--id_space", type=int, default=10_000_000)
    p.add_argument("--seconds", type=float, default=2.0, help="per op, side and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--transport", default="stream", choices=["stream", "unary"])
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.seconds, a.rounds, a.pool_rows = 0.3, 1, 20_000
    if a.ids < 1 or a.dim < 1 or a.pool_rows < a.ids or a.id_space < a.ids:
        p.error("need --ids >= 1, --dim >= 1, --pool_rows >= --ids, --id_space >= --ids")
    sys.path.insert(0, os.path.abspath(a.pythonpath))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ps
    from server_process import start_server

    reqs = requests(a.pool_rows, a.ids, a.id_space, seed=1)
    grads = np.full((a.ids, a.dim), 1e-3, np.float32)
    out = np.empty((a.ids, a.dim), np.float32)
    with tempfile.TemporaryDirectory(prefix="rows_bench.") as d:
        listen = f"unix:{d}/ps.sock" if a.listen == "unix" else "127.0.0.1:0"
        with start_server(a.ps_server, ["--mode=async", "--num_workers=1",
                                        "--sparse_optimizer=sgd", "--sparse_lr=0.01"],
                          logdir=d, name="ps_server", listen=listen) as server:
            client = ps.Client([server.address], 0, 1, transport=a.transport)
            client.declare_tables([ps.Table("rows", a.dim, seed=1)])
            client.init({"unused": np.zeros(1, np.float32)})
            for ids in reqs:  # every row exists before timing
                client.push_rows("rows", ids, grads)
            print(f"rows_bench: 1 ps_server (async, sgd) over {a.listen}, transport "
                  f"{a.transport}; K={a.ids} dim={a.dim}, {len(reqs)} requests "
                  f"({len(reqs) * a.ids} ids), {a.rounds} round(s) of {a.seconds} s per side")
            lat: Dict[str, Dict[str, List[float]]] = {op: {"cpp": [], "py": []} for op in OPS}
            for _ in range(a.rounds):
                for op in OPS:
                    n, end = 0, time.perf_counter() + 2 * a.seconds
                    while time.perf_counter() < end:
                        ids = reqs[n % len(reqs)]
                        call = python_call(client, op, ids, grads, out)
                        for side in (("cpp", "py") if n % 2 == 0 else ("py", "cpp")):
                            if side == "cpp":
                                t = client._c._time_rows("rows", [ids], op, grads, out, 1)[0]
                            else:
                                start = time.perf_counter()
                                call()
                                t = time.perf_counter() - start
                            lat[op][side].append(t)
                        n += 1
            client.close()
    print(f"{'op':<16}{'C++ p50 us':>12}{'Python p50 us':>15}{'overhead us':>13}"
          f"{'ratio':>8}{'pairs':>8}")
    for op in OPS:
        cpp, py = (np.array(lat[op][side]) * 1e6 for side in ("cpp", "py"))
        print(f"{op + '_rows':<16}{np.median(cpp):>12.1f}{np.median(py):>15.1f}"
              f"{np.median(py - cpp):>13.1f}{np.median(py) / np.median(cpp):>8.3f}{len(cpp):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
