"""ps: the Python client of the parameter server.

A thin, typed wrapper of the C++ client (client/ps_client.h) through the
pybind11 extension ``ps._ps``. Tensors are dicts of name -> float32 numpy
array, in the model's order (worker 0's ``init`` sets it)::

    import ps
    client = ps.Client("127.0.0.1:50051,127.0.0.1:50052", worker_id=0, num_workers=2,
                       tls_dir="/etc/ps/certs")
    client.init({"w": np.zeros((784, 10), np.float32), "b": np.zeros(10, np.float32)})
    weights = client.pull()
    for step in range(100):
        weights = client.push_pull(compute_grads(weights))

Every failure of a call is an exception: a subclass of ``ps.Error`` named
after the gRPC status (``ps.Unavailable``, ``ps.PermissionDenied``,
``ps.InvalidArgument``, ``ps.DeadlineExceeded``, ...) carrying the server's
message. Arguments that do not fit the model (dtype, shape, names, a
non-contiguous array) raise ``TypeError``/``ValueError`` naming the tensor
before anything is sent. Arrays go to and from the wire without an extra
copy: gradients are read from their memory, and ``pull``/``push_pull`` can
write the weights into arrays of the caller's (``out=``). The GIL is
released while a call waits.

A Client is for one thread at a time, like the C++ client.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _ps

__all__ = ["Client", "Error", "PushPullInProgress", "connect_from_env"]


class Error(Exception):
    """A call to the parameter servers failed; the subclass names the gRPC status."""

    code: int = 2  # UNKNOWN


# gRPC status codes and the exception class of each (absl::StatusCode values).
_CODES = [
    (1, "Cancelled"),
    (2, "Unknown"),
    (3, "InvalidArgument"),
    (4, "DeadlineExceeded"),
    (5, "NotFound"),
    (6, "AlreadyExists"),
    (7, "PermissionDenied"),
    (8, "ResourceExhausted"),
    (9, "FailedPrecondition"),
    (10, "Aborted"),
    (11, "OutOfRange"),
    (12, "Unimplemented"),
    (13, "Internal"),
    (14, "Unavailable"),
    (15, "DataLoss"),
    (16, "Unauthenticated"),
]
_classes = {}
for _code, _name in _CODES:
    _cls = type(_name, (Error,), {"code": _code, "__doc__": f"The servers answered {_name}."})
    globals()[_name] = _cls
    __all__.append(_name)
    _classes[_code] = _cls
_ps._register_errors(_classes)
del _code, _name, _cls

Tensors = Mapping[str, np.ndarray]


def _servers(servers: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(servers, str):
        out = [s.strip() for s in servers.split(",") if s.strip()]
    else:
        out = [str(s) for s in servers]
    if not out:
        raise ValueError("servers: give at least one HOST:PORT")
    return out


def _as_array(name: str, value, shape: Optional[Tuple[int, ...]]) -> np.ndarray:
    """`value` (a numpy array or a CPU tensor) as a float32 C-contiguous array, unchanged."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        if getattr(value, "device", None) is not None and str(value.device) != "cpu":
            raise ValueError(f"tensor {name!r}: on {value.device}, expected a CPU tensor")
        value = value.detach().numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(f"tensor {name!r}: expected a numpy array or a CPU tensor, "
                        f"got {type(value).__name__}")
    if value.dtype != np.float32:
        raise TypeError(f"tensor {name!r}: dtype {value.dtype}, expected float32")
    if not value.flags["C_CONTIGUOUS"]:
        raise ValueError(f"tensor {name!r}: not C-contiguous (use np.ascontiguousarray)")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"tensor {name!r}: shape {tuple(value.shape)}, expected {tuple(shape)}")
    return value


class Client:
    """One worker's connection to every parameter-server shard.

    Args:
      servers: "HOST:PORT,HOST:PORT" or a list, shard 0 first; "unix:/ABS/PATH" for a
        server on a unix socket of this host (no TLS needed there).
      worker_id: this worker, 0 <= worker_id < num_workers.
      num_workers: W; the servers must have been started with the same.
      tls_dir: a folder laid out by deploy/make_certs.sh; picks ca.pem and
        worker-<id>.pem/.key (explicit tls_* arguments win).
      tls_cert, tls_key, tls_ca: PEM files for mutual TLS.
      server_name: the name to check the servers' certificates against.
      auth_token_file: a bearer token file (needs TLS).
      insecure: allow plaintext to a non-loopback server.
      transport: "stream" (default) or "unary".
      wire_dtype: how tensors travel: "f32" (default, exact) or "bf16"
        (half the bytes: gradients are rounded to bfloat16, nearest even,
        before sending, and pulled weights arrive rounded the same way,
        widened back into float32 arrays; the servers keep float32 weights
        and optimizer state). Anything else is a ValueError.
      connect_timeout: seconds to wait for the servers to come up.
      wait_timeout: seconds a call waits for the other workers.
      retry_timeout: seconds a call keeps retrying when a server restarts
        (0: no retries).
    """

    def __init__(self, servers: Union[str, Sequence[str]], worker_id: int, num_workers: int, *,
                 tls_dir: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_ca: Optional[str] = None,
                 server_name: Optional[str] = None, auth_token_file: Optional[str] = None,
                 insecure: bool = False, transport: str = "stream", wire_dtype: str = "f32",
                 connect_timeout: float = 60.0, wait_timeout: float = 120.0,
                 retry_timeout: float = 60.0) -> None:
        if wire_dtype not in ("f32", "bf16"):
            raise ValueError(f"wire_dtype: expected 'f32' or 'bf16', got {wire_dtype!r}")
        if tls_dir is not None:
            tls_ca = tls_ca or os.path.join(tls_dir, "ca.pem")
            tls_cert = tls_cert or os.path.join(tls_dir, f"worker-{worker_id}.pem")
            tls_key = tls_key or os.path.join(tls_dir, f"worker-{worker_id}.key")
        self._num_workers = int(num_workers)
        self._worker_id = int(worker_id)
        self._c = _ps.Client(_servers(servers), self._worker_id, self._num_workers,
                             tls_cert or "", tls_key or "", tls_ca or "", server_name or "",
                             auth_token_file or "", bool(insecure), transport, wire_dtype,
                             float(connect_timeout), float(wait_timeout), float(retry_timeout))
        self._names: List[str] = []
        self._shapes: List[Tuple[int, ...]] = []

    def init(self, tensors: Tensors) -> None:
        """Creates the parameters (worker 0) or checks them (every other worker).

        `tensors` is an ordered dict name -> float32 array. Worker 0's values
        create the parameters on the servers; the others wait for worker 0
        and get ps.FailedPrecondition if their names or shapes differ.
        """
        if not tensors:
            raise ValueError("init: no tensors")
        names = list(tensors.keys())
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"tensor names must be str, got {n!r}")
        arrays = [_as_array(n, tensors[n], None) for n in names]
        shapes = [tuple(int(d) for d in a.shape) for a in arrays]
        values = arrays if self._worker_id == 0 else None
        self._c.init(names, [list(s) for s in shapes], values)
        self._names, self._shapes = names, shapes

    def _arrays(self, what: str, tensors: Tensors) -> List[np.ndarray]:
        if not self._names:
            raise ValueError(f"{what}: call init first")
        if set(tensors.keys()) != set(self._names):
            missing = [n for n in self._names if n not in tensors]
            extra = [n for n in tensors if n not in self._names]
            raise ValueError(f"{what}: tensor names differ from the model's: "
                             f"missing {missing}, unknown {extra}")
        return [_as_array(n, tensors[n], s) for n, s in zip(self._names, self._shapes)]

    def _out(self, what: str, out: Optional[Tensors]) -> Optional[List[np.ndarray]]:
        """`out`'s arrays in model order, checked to be writeable; None stays None."""
        if out is None:
            return None
        arrays = self._arrays(what, out)
        for n, a in zip(self._names, arrays):
            if not a.flags["WRITEABLE"]:
                raise ValueError(f"tensor {n!r}: out array is not writeable")
        return arrays

    def _dict(self, arrays: List[np.ndarray]) -> Dict[str, np.ndarray]:
        return OrderedDict(zip(self._names, arrays))

    def pull(self, min_version: int = 0, *,
             out: Optional[Tensors] = None) -> Dict[str, np.ndarray]:
        """The weights, once every shard is at `min_version` or later.

        With `out` (a dict like the model's, of writeable float32
        C-contiguous arrays or CPU tensors) the weights are written into it
        and it is returned; otherwise into new arrays.
        """
        if not self._names:
            raise ValueError("pull: call init first")
        arrays = self._c.pull(int(min_version), self._out("pull", out))
        return out if out is not None else self._dict(arrays)

    def push(self, grads: Tensors) -> None:
        """Sends a gradient for the weights last pulled."""
        self._c.push(self._arrays("push", grads))

    def push_pull(self, grads: Tensors, *,
                  out: Optional[Tensors] = None) -> Dict[str, np.ndarray]:
        """Sends a gradient and returns the weights after it (sync: the next step's).

        `out` as for pull(); it must not share memory with `grads`.
        """
        g = self._arrays("push_pull", grads)
        arrays = self._c.push_pull(g, self._out("push_pull", out))
        return out if out is not None else self._dict(arrays)

    def start_push_pull(self, out: Tensors) -> "PushPullInProgress":
        """A push-pull whose gradient is sent tensor by tensor, e.g. from
        backward hooks as each becomes final, so that sending overlaps the
        rest of backward. The new weights land in `out` (as for pull()) when
        its wait() returns. Make no other call of this client until then.
        """
        return PushPullInProgress(self, self._c.start_push_pull(self._out("start_push_pull", out)))

    @property
    def version(self) -> int:
        """The version of the weights last pulled (sync: the step)."""
        return self._c.version

    @property
    def mode(self) -> str:
        """"sync" or "async", as the servers run."""
        return self._c.mode

    @property
    def num_shards(self) -> int:
        return self._c.num_shards

    @property
    def num_workers(self) -> int:
        """W, the number of workers."""
        return self._num_workers

    @property
    def worker_id(self) -> int:
        """This worker, 0 <= worker_id < num_workers: e.g. to pick its share of the data."""
        return self._worker_id


class PushPullInProgress:
    """A push-pull in progress (Client.start_push_pull): send() every tensor
    exactly once, in any order, then wait()."""

    def __init__(self, client: Client, handle) -> None:
        self._client = client
        self._h = handle
        self._index = {n: i for i, n in enumerate(client._names)}

    def send(self, name: str, grad) -> None:
        """Sends the gradient of tensor `name` (a float32 C-contiguous array or
        CPU tensor of its shape), which must stay unchanged until wait()
        returns. A name sent twice fails wait() with ps.InvalidArgument."""
        i = self._index.get(name)
        if i is None:
            raise ValueError(f"tensor {name!r}: not in the model")
        self._h.send(i, _as_array(name, grad, self._client._shapes[i]))

    def wait(self) -> None:
        """Waits until the new weights are in `out`; raises ps.Error if the
        push-pull failed (ps.FailedPrecondition if a tensor was never sent)."""
        self._h.wait()


def connect_from_env(**kwargs) -> Client:
    """A Client from the environment, as torch.distributed reads RANK and WORLD_SIZE.

    PS_SERVERS (HOST:PORT or unix:PATH,... shard 0 first), PS_WORKER_ID and PS_NUM_WORKERS
    are required; PS_TLS_DIR (a deploy/make_certs.sh folder) is optional.
    deploy/local_cluster.sh --worker_cmd sets them. `kwargs` go to Client
    (e.g. retry_timeout) and win over the environment.
    """
    env = {}
    for var in ("PS_SERVERS", "PS_WORKER_ID", "PS_NUM_WORKERS"):
        if not os.environ.get(var):
            raise ValueError(f"{var} is not set (deploy/local_cluster.sh --worker_cmd sets "
                             "PS_SERVERS, PS_WORKER_ID and PS_NUM_WORKERS)")
        env[var] = os.environ[var]
    ints = {}
    for var in ("PS_WORKER_ID", "PS_NUM_WORKERS"):
        try:
            ints[var] = int(env[var])
        except ValueError:
            raise ValueError(f"{var}={env[var]!r} is not an integer") from None
    if os.environ.get("PS_TLS_DIR"):
        kwargs.setdefault("tls_dir", os.environ["PS_TLS_DIR"])
    return Client(env["PS_SERVERS"], ints["PS_WORKER_ID"], ints["PS_NUM_WORKERS"], **kwargs)
