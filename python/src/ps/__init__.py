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
released while a call waits. Ctrl-C (or any signal whose handler raises)
cancels the call it interrupts and raises at once.

Embedding tables (docs/embeddings.md) are declared before ``init`` as
``ps.Table``s; ``pull_rows``/``push_rows`` move the rows of a batch's ids::

    client.declare_tables([ps.Table("user", dim=16, seed=1)])
    client.init(dense)
    rows = client.pull_rows("user", ids)        # (len(ids), 16) float32
    client.push_rows("user", ids, row_grads)    # before the step's dense push

A Client is for one thread at a time, like the C++ client; ``close()``
(or leaving a ``with ps.Client(...) as client:`` block) ends its
connections, cancelling what is in flight, and may come from another
thread to end a blocked call.

The package is typed (PEP 561): ``_ps.pyi`` states the extension's types.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union, overload

import numpy as np

from . import _ps
from ._arrays import Float32Array as Float32Array
from ._arrays import TensorLike as TensorLike
from ._arrays import Tensors as Tensors
from ._arrays import as_ids, float_array, tensor_array
from .errors import (BY_CODE, Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                     Error, FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                     Unimplemented, Unknown)

__all__ = [
    "Client", "Error", "PushPullInProgress", "PushPullRowsInProgress", "Table",
    "connect_from_env",
    "Float32Array", "TensorLike", "Tensors",
    "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
]

_ps._register_errors({code: cls for code, cls in BY_CODE.items()})


_Out = TypeVar("_Out", bound=Tensors)


def _servers(servers: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(servers, str):
        out = [s.strip() for s in servers.split(",") if s.strip()]
    else:
        out = [str(s) for s in servers]
    if not out:
        raise ValueError("servers: give at least one HOST:PORT")
    return out


@dataclasses.dataclass(frozen=True)
class Table:
    """An embedding table: `dim` floats a row, keyed by uint64 ids. New rows are
    uniform in [-init_scale, init_scale), drawn from (seed, id) alone (so any
    shard and any restart makes the same row). Every worker declares the same
    tables in the same order (Client.declare_tables)."""

    name: str
    dim: int
    seed: int = 0
    init_scale: float = 0.01

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Table name: expected str, got {self.name!r}")
        for field in ("dim", "seed"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"table {self.name!r}: {field} must be an int, got {v!r}")
        if not 0 <= int(self.seed) < 1 << 64:
            raise ValueError(f"table {self.name!r}: seed {self.seed} is not a uint64")


class Client:
    """One worker's connection to every parameter-server shard.

    Args:
      servers: "HOST:PORT,HOST:PORT" or a list, shard 0 first; "unix:/ABS/PATH" for a
        server on a unix socket of this host (no TLS needed there).
      worker_id: this worker, 0 <= worker_id < num_workers.
      num_workers: W; the servers must have been started with the same. With a
        coordinator, None takes the job's (what its servers wrote in etcd).
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
      connect_timeout, wait_timeout: seconds to wait for the servers to
        come up, and that a call waits for the other workers.
      retry_timeout: seconds a call keeps retrying when a server restarts
        (0: no retries).
      coordinator: "etcd://HOST:PORT[,HOST:PORT...]", the etcd of an elastic
        cluster (docs/elastic.md): the client registers this worker there
        as ps_worker --coordinator does (worker_id None: the lowest id no
        live worker of the job holds) and, with servers None, connects to
        the servers registered there; with TLS files, over TLS with them.
        close() leaves the job.
      job, coordinator_ttl: as ps_worker's --job and --coordinator_ttl.
      data_shares: with a coordinator, take each epoch's share of the data
        by the job's membership, through a ps.torch.ElasticSampler.

    A Client is a context manager: leaving the ``with`` block closes it.
    """

    def __init__(self, servers: Union[str, Sequence[str], None], worker_id: Optional[int],
                 num_workers: Optional[int], *,
                 tls_dir: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_ca: Optional[str] = None,
                 server_name: Optional[str] = None, auth_token_file: Optional[str] = None,
                 insecure: bool = False, transport: str = "stream", wire_dtype: str = "f32",
                 connect_timeout: float = 60.0, wait_timeout: float = 120.0,
                 retry_timeout: float = 60.0, coordinator: Optional[str] = None,
                 job: str = "default", coordinator_ttl: float = 10.0,
                 data_shares: bool = False) -> None:
        if wire_dtype not in ("f32", "bf16"):
            raise ValueError(f"wire_dtype: expected 'f32' or 'bf16', got {wire_dtype!r}")
        self._member: Optional[_ps.JobMember] = None
        follow: Optional[_ps.JobMember] = None
        if coordinator:
            # etcd over TLS with the CA and a certificate of tls_dir or
            # tls_*: before the id is known, tls_dir gives worker 0's (any
            # worker certificate will do for etcd).
            member_id = -1 if worker_id is None else int(worker_id)
            cert, key, ca = tls_cert, tls_key, tls_ca
            if tls_dir is not None:
                ca = ca or os.path.join(tls_dir, "ca.pem")
                cert = cert or os.path.join(tls_dir, f"worker-{max(member_id, 0)}.pem")
                key = key or os.path.join(tls_dir, f"worker-{max(member_id, 0)}.key")
            self._member = _ps.JobMember(coordinator, job, float(coordinator_ttl), member_id,
                                         -1 if num_workers is None else int(num_workers),
                                         servers is None, cert or "", key or "", ca or "",
                                         bool(insecure), bool(data_shares))
            worker_id = self._member.worker_id
            num_workers = self._member.num_workers
            if servers is None:  # from the shard map, followed when a server moves
                servers, follow = self._member.servers, self._member
        elif servers is None or worker_id is None or num_workers is None:
            raise ValueError("Client: servers, worker_id and num_workers are required without "
                             "a coordinator")
        if tls_dir is not None:
            tls_ca = tls_ca or os.path.join(tls_dir, "ca.pem")
            tls_cert = tls_cert or os.path.join(tls_dir, f"worker-{worker_id}.pem")
            tls_key = tls_key or os.path.join(tls_dir, f"worker-{worker_id}.key")
        self._num_workers = int(num_workers)
        self._worker_id = int(worker_id)
        try:
            self._c = _ps.Client(_servers(servers), self._worker_id, self._num_workers,
                                 tls_cert or "", tls_key or "", tls_ca or "", server_name or "",
                                 auth_token_file or "", bool(insecure), transport, wire_dtype,
                                 float(connect_timeout), float(wait_timeout),
                                 float(retry_timeout), follow)
        except BaseException:
            if self._member is not None:
                self._member.leave()
            raise
        self._names: List[str] = []
        self._shapes: List[Tuple[int, ...]] = []
        self._tables: Dict[str, Table] = OrderedDict()

    def close(self) -> None:
        """Cancels the call in flight, if any (it raises ps.Cancelled), and a
        push-pull started and not waited on, and closes the connections to
        the servers. Any thread may call it; calling it again does nothing.
        Every later call raises ValueError. Garbage collection does the same.
        With a coordinator, the worker leaves its job."""
        self._c.close()
        if self._member is not None:
            self._member.leave()

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._c.closed

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

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
        arrays = [tensor_array(n, tensors[n], None) for n in names]
        shapes = [tuple(int(d) for d in a.shape) for a in arrays]
        values = arrays if self._worker_id == 0 else None
        self._c.init(names, [list(s) for s in shapes], values)
        self._names, self._shapes = names, shapes

    def declare_tables(self, tables: Sequence[Table]) -> None:
        """Declares the model's embedding tables (a list of ps.Table), replacing
        any declared before; call it before init(), on every worker, with the
        same tables in the same order. ps.InvalidArgument for tables the
        servers cannot hold (empty or repeated names, dim outside 1..65536),
        ps.FailedPrecondition after init() or when another worker declared
        other tables."""
        tables = list(tables)
        for t in tables:
            if not isinstance(t, Table):
                raise TypeError(f"declare_tables: expected ps.Table, got {type(t).__name__}")
        self._c.declare_tables([(t.name, int(t.dim), int(t.seed), float(t.init_scale))
                                for t in tables])
        self._tables = OrderedDict((t.name, t) for t in tables)

    @property
    def tables(self) -> List[Table]:
        """The declared embedding tables, in order."""
        return list(self._tables.values())

    @property
    def names(self) -> List[str]:
        """The model's tensor names, in order (empty before init)."""
        return list(self._names)

    def pull_rows(self, table: str, ids: object, *,
                  out: Optional[Float32Array] = None) -> Float32Array:
        """The rows of `ids` (a 1-D integer array-like or tensor: any order,
        repeats allowed, negative ids refused) of `table`, as a float32 array
        (len(ids), dim) in the caller's order; into `out` (a writeable float32
        C-contiguous array of that shape) when given. Each id is fetched once.
        Sync mode: the rows of the step last pulled."""
        r = self._c.pull_rows(table, ids, out)  # None: not plain arrays (_checked)
        if r is None:
            i, _, o = self._checked("pull_rows", table, ids, None, out)
            r = self._c.pull_rows(table, i, o)
        assert r is not None, "checked arguments are plain"
        return r

    def push_rows(self, table: str, ids: object, grads: TensorLike) -> None:
        """Pushes the gradient rows `grads` (float32 C-contiguous, (len(ids),
        dim), an array or CPU tensor) of `ids` (as for pull_rows; the rows of
        a repeated id are summed) to `table`'s sparse optimizer (ps_server
        --sparse_optimizer). Sync mode: they join this worker's gradient of
        the current step, so push each table once per step (a second push
        raises ps.FailedPrecondition) and before the step's push/push_pull.
        Async: applied on arrival."""
        if self._c.push_rows(table, ids, grads) is None:  # not plain arrays
            i, g, _ = self._checked("push_rows", table, ids, grads, None)
            self._c.push_rows(table, i, g)

    def push_pull_rows(self, table: str, ids: object, grads: TensorLike, *,
                       out: Optional[Float32Array] = None) -> Float32Array:
        """push_rows, then the rows of the same `ids` after that push (as
        pull_rows returns them), in one round trip per server. Async and SSP
        only: in sync mode it raises ps.FailedPrecondition (pushed rows
        change when the step closes, after this worker's push: use
        start_push_pull_rows)."""
        r = self._c.push_pull_rows(table, ids, grads, out)  # None: not plain arrays
        if r is None:
            i, g, o = self._checked("push_pull_rows", table, ids, grads, out)
            r = self._c.push_pull_rows(table, i, g, o)
        assert r is not None, "checked arguments are plain"
        return r

    def start_push_pull_rows(self, table: str, ids: object, grads: TensorLike, *,
                             out: Optional[Float32Array] = None) -> "PushPullRowsInProgress":
        """push_pull_rows in flight: its wait() returns the rows (`out` when
        given, which it holds until then). Sync mode: call it for the step,
        then the step's push_pull (or push), then wait(): the rows of the
        step that closed, with this push (it pushes the rows at once, as
        push_rows, then waits for the step's close beside the push_pull: two
        round trips where push_rows, push_pull, pull_rows take three). Async
        and SSP: push_pull_rows' one round trip, while this client makes
        other calls. `ids` and `grads` are read before it returns."""
        i, g, o = self._checked("start_push_pull_rows", table, ids, grads, out)
        return self._c.start_push_pull_rows(table, i, g, o)

    def _checked(self, what: str, table: str, ids: object, grads: Optional[TensorLike],
                 out: Optional[Float32Array]
                 ) -> Tuple[Any, Float32Array, Float32Array]:
        """A rows call's arguments converted and checked, naming the problem:
        the ids as a uint64 array, `grads` as float32 rows (an empty array
        when None) and `out` checked to take the rows (a new array when None)."""
        t = self._tables.get(table)
        if t is None:
            raise ValueError(f"{what}: table {table!r} was not declared "
                             f"(Client.declare_tables, before init)")
        dim, i = int(t.dim), as_ids(table, ids)
        g = (np.empty((0, dim), np.float32) if grads is None else
             float_array(f"gradient rows of table {table!r}", grads, (i.size, dim)))
        if out is None:
            return i, g, np.empty((i.size, dim), np.float32)
        out = float_array(f"rows of table {table!r}", out, (i.size, dim))
        if not out.flags["WRITEABLE"]:
            raise ValueError(f"rows of table {table!r}: out array is not writeable")
        return i, g, out

    def _arrays(self, what: str, tensors: Tensors) -> List[Float32Array]:
        if not self._names:
            raise ValueError(f"{what}: call init first")
        if set(tensors.keys()) != set(self._names):
            missing = [n for n in self._names if n not in tensors]
            extra = [n for n in tensors if n not in self._names]
            raise ValueError(f"{what}: tensor names differ from the model's: "
                             f"missing {missing}, unknown {extra}")
        return [tensor_array(n, tensors[n], s) for n, s in zip(self._names, self._shapes)]

    def _out(self, what: str, out: Optional[Tensors]) -> Optional[List[Float32Array]]:
        """`out`'s arrays in model order, checked to be writeable; None stays None."""
        if out is None:
            return None
        arrays = self._arrays(what, out)
        for n, a in zip(self._names, arrays):
            if not a.flags["WRITEABLE"]:
                raise ValueError(f"tensor {n!r}: out array is not writeable")
        return arrays

    def _dict(self, arrays: List[Float32Array]) -> Dict[str, Float32Array]:
        return OrderedDict(zip(self._names, arrays))

    @overload
    def pull(self, min_version: int = 0, *, out: None = None) -> Dict[str, Float32Array]: ...

    @overload
    def pull(self, min_version: int = 0, *, out: _Out) -> _Out: ...

    def pull(self, min_version: int = 0, *,
             out: Optional[Tensors] = None) -> Union[Dict[str, Float32Array], Tensors]:
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

    @overload
    def push_pull(self, grads: Tensors, *, out: None = None) -> Dict[str, Float32Array]: ...

    @overload
    def push_pull(self, grads: Tensors, *, out: _Out) -> _Out: ...

    def push_pull(self, grads: Tensors, *,
                  out: Optional[Tensors] = None) -> Union[Dict[str, Float32Array], Tensors]:
        """Sends a gradient and returns the weights after it (sync: the next step's).

        `out` as for pull(); it must not share memory with `grads`.
        """
        g = self._arrays("push_pull", grads)
        arrays = self._c.push_pull(g, self._out("push_pull", out))
        return out if out is not None else self._dict(arrays)

    def start_push_pull(self, out: Tensors) -> PushPullInProgress:
        """A push-pull whose gradient is sent tensor by tensor, e.g. from
        backward hooks as each becomes final, so that sending overlaps the
        rest of backward. The new weights land in `out` (as for pull()) when
        its wait() returns. Make no other call of this client until then.
        """
        arrays = self._out("start_push_pull", out)
        assert arrays is not None  # out is not None
        return PushPullInProgress(self, self._c.start_push_pull(arrays))

    @property
    def version(self) -> int:
        """The version of the weights last pulled (sync: the step)."""
        return self._c.version

    @property
    def mode(self) -> str:
        """"sync", "async" or "ssp", as the servers run."""
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


# Client.start_push_pull_rows' handle: wait() returns the rows.
PushPullRowsInProgress = _ps.PushPullRowsInProgress


class PushPullInProgress:
    """A push-pull in progress (Client.start_push_pull): send() every tensor
    exactly once, in any order, then wait()."""

    def __init__(self, client: Client, handle: _ps.PushPullInProgress) -> None:
        self._client = client
        self._h = handle
        self._index = {n: i for i, n in enumerate(client.names)}
        self._shapes = list(client._shapes)

    def send(self, name: str, grad: TensorLike) -> None:
        """Sends the gradient of tensor `name` (a float32 C-contiguous array or
        CPU tensor of its shape), which must stay unchanged until wait()
        returns. A name sent twice fails wait() with ps.InvalidArgument."""
        i = self._index.get(name)
        if i is None:
            raise ValueError(f"tensor {name!r}: not in the model")
        self._h.send(i, tensor_array(name, grad, self._shapes[i]))

    def wait(self) -> None:
        """Waits until the new weights are in `out`; raises ps.Error if the
        push-pull failed (ps.FailedPrecondition if a tensor was never sent)."""
        self._h.wait()


def connect_from_env(**kwargs: Any) -> Client:
    """A Client from the environment, as torch.distributed reads RANK and WORLD_SIZE.

    PS_SERVERS (HOST:PORT or unix:PATH,... shard 0 first), PS_WORKER_ID and PS_NUM_WORKERS
    are required; PS_TLS_DIR (a deploy/make_certs.sh folder) is optional.
    deploy/local_cluster.sh --worker_cmd sets them. With PS_COORDINATOR
    (etcd://HOST:PORT, docs/elastic.md; PS_JOB its job) all three may be left
    out: the worker takes them from etcd. `kwargs`
    go to Client (e.g. retry_timeout) and win over the environment.
    """
    coordinator = os.environ.get("PS_COORDINATOR")
    if coordinator:
        kwargs.setdefault("coordinator", coordinator)
        if os.environ.get("PS_JOB"):
            kwargs.setdefault("job", os.environ["PS_JOB"])
    required = () if coordinator else ("PS_SERVERS", "PS_WORKER_ID", "PS_NUM_WORKERS")
    for var in required:
        if not os.environ.get(var):
            raise ValueError(f"{var} is not set (deploy/local_cluster.sh --worker_cmd sets "
                             "PS_SERVERS, PS_WORKER_ID and PS_NUM_WORKERS; with "
                             "PS_COORDINATOR none is needed)")
    ints: Dict[str, Optional[int]] = {}
    for var in ("PS_WORKER_ID", "PS_NUM_WORKERS"):
        value = os.environ.get(var)
        try:
            ints[var] = int(value) if value else None
        except ValueError:
            raise ValueError(f"{var}={value!r} is not an integer") from None
    if os.environ.get("PS_TLS_DIR"):
        kwargs.setdefault("tls_dir", os.environ["PS_TLS_DIR"])
    return Client(os.environ.get("PS_SERVERS") or None, ints["PS_WORKER_ID"],
                  ints["PS_NUM_WORKERS"], **kwargs)
