"""wheel_check: run by wheel_test.sh with a venv's python, from a folder
outside the source tree, after `pip install` of the wheel.

    wheel_check.py VENV       (PS_SERVER_BIN: the ps_server binary)

Checks that `ps` comes from VENV's site-packages, that ps.torch imports
(torch from Debian, seen through --system-site-packages), and that the
installed extension really talks to a ps_server: init, pull, and two sync
push-pulls whose results are the SGD steps the server must make. Exits 0 on
success; an AssertionError or a ps.Error otherwise."""

import os
import sys
from collections import OrderedDict

import numpy as np

import ps
import ps.torch

# cluster.py (beside this file) and ../server_process.py start the servers;
# appended after `import ps`: the runfiles' python/ holds a `ps` too.
here = os.path.dirname(os.path.abspath(__file__))
sys.path += [here, os.path.dirname(here)]
from cluster import Cluster  # noqa: E402

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(ps.__file__)
assert where.startswith(venv + os.sep) and "site-packages" in where, \
    f"ps comes from {where}, not from {venv}'s site-packages"
assert os.path.realpath(ps._ps.__file__).startswith(venv + os.sep), ps._ps.__file__
assert hasattr(ps.torch, "DistributedOptimizer"), dir(ps.torch)

LR = 0.5
with Cluster(shards=1, workers=1, mode="sync", lr=LR) as c:
    client = ps.Client(c.servers, 0, 1, connect_timeout=20, wait_timeout=30)
    start = np.arange(6, dtype=np.float32).reshape(2, 3)
    client.init(OrderedDict(w=start, b=np.ones(3, np.float32)))
    w = client.pull()
    assert np.array_equal(w["w"], start), w
    grad = OrderedDict(w=np.full((2, 3), 2.0, np.float32), b=np.full(3, -1.0, np.float32))
    for step in (1, 2):
        w = client.push_pull(grad)
        np.testing.assert_allclose(w["w"], start - step * LR * 2.0, rtol=0, atol=1e-6)
        np.testing.assert_allclose(w["b"], 1.0 + step * LR, rtol=0, atol=1e-6)
    assert client.version == 2, client.version
print(f"wheel_check: ps from {where}; two push_pulls to version {client.version}, "
      f"w[0] = {w['w'][0].tolist()}")
