"""ps.torch: train a PyTorch model on the parameter servers.

A single-process script adopts it in a few lines::

    import ps.torch
    client = ps.torch.connect_from_env()
    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
    # the loop is unchanged: opt.zero_grad(); loss.backward(); opt.step()

At construction worker 0 creates the parameters on the servers from the
model's current values, and every other worker copies the servers' values
into its parameters, so all workers start equal. During ``backward()`` a
hook on each parameter's gradient accumulator (the one Horovod and BytePS
use) hands its gradient to the client's layer-wise push-pull as soon as it
is final, so that sending overlaps the rest of backward; ``step()`` sends
what backward did not produce (zeros for a parameter without a gradient),
waits, and makes the servers' new weights the parameters' values by
swapping each parameter's storage (``p.data``) with the buffer they arrived
in: a tensor sharing a parameter's old storage (``p.detach()``, a
``state_dict()`` kept without a copy) becomes the next step's buffer, so
clone what you keep.
The servers' optimizer (``ps_server --lr``) makes the update, in sync or
async mode as the servers run. Only parameters are shared: buffers
(BatchNorm's running statistics) stay local to each worker.

Embedding tables stay on the servers: ``ps.torch.Embedding(table, dim,
client)`` is a module whose forward pulls the rows of the batch's ids and
whose backward pushes their gradients (the servers' ``--sparse_optimizer``
updates them), while DistributedOptimizer handles the dense parameters::

    emb = ps.torch.Embedding("user", 16, client)   # before the optimizer
    model = torch.nn.Sequential(emb, torch.nn.Flatten(), torch.nn.Linear(16 * F, 1))
    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)

The rule that orders them: a step's rows must reach the servers before its
dense gradient (sync mode: the step closes on the dense gradients and
drops rows that come later; and the client takes no other call while a
push-pull is in flight). An Embedding's backward is among the last to run
(its ids are the model's inputs), after the dense layers' gradients are
final, so while a client has Embeddings the optimizer's backward hooks
send nothing: every dense gradient goes out in ``step()``, after backward
pushed the rows, whatever ``overlap`` says.

Parameters must be float32 tensors on the CPU. Call ``step()`` after every
``backward()``: a gradient produced twice before ``step()`` (gradient
accumulation over several backward passes) raises RuntimeError. With
``overlap`` a gradient is on its way once backward produced it, so code
that changes gradients between ``backward()`` and ``step()`` (clipping,
scaling) must run with ``overlap=False``.
"""

from __future__ import annotations

import ctypes
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import numpy as np
import torch

from . import Client, Float32Array, PushPullInProgress, PushPullRowsInProgress, Table
from ._arrays import as_ids
from . import connect_from_env  # re-exported: ps.torch.connect_from_env

__all__ = ["DistributedOptimizer", "ElasticSampler", "Embedding", "connect_from_env",
           "keep_freed_memory"]

# The Embeddings made on each client: while a client has any, the dense
# gradients wait for step() (the module docstring's rule).
_embeddings: weakref.WeakKeyDictionary[Client, weakref.WeakSet[Embedding]] = \
    weakref.WeakKeyDictionary()


def _has_embeddings(client: Client) -> bool:
    return len(_embeddings.get(client, ())) > 0


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_KEEP_BYTES = 1 << 30  # freed memory kept at the top of the heap
_MMAP_MAX = 32 << 20  # glibc's largest mmap threshold on 64-bit


def keep_freed_memory() -> bool:
    """Tells glibc's malloc to keep freed memory in the process.

    Every training step frees and allocates tensors of a few MB (activations,
    gradients). By default glibc hands blocks that large back to the kernel
    when they are freed (munmap, or trimming the heap), so the next step
    page-faults them in again and the kernel zeroes every page: measured on
    the 784-512-256-10 MLP at batch 64, means of 84-590 page faults per step
    against 4-81 with this setting (varying with the machine's load). It
    sets M_MMAP_THRESHOLD to 32 MB (blocks below it come from the heap) and
    M_TRIM_THRESHOLD to 1 GB (the heap
    keeps up to that much freed memory), for the whole process, as PyTorch's
    CPU performance guide gets with jemalloc or tcmalloc; the process keeps
    its peak heap size. Returns False, changing nothing, where the C library
    is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX) and
                mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES))


_keep_freed = keep_freed_memory  # the constructor's argument shadows the name


class DistributedOptimizer(torch.optim.Optimizer):
    """A torch.optim.Optimizer whose update is made by the parameter servers.

    Args:
      named_parameters: the model's (name, parameter) pairs, e.g.
        ``model.named_parameters()``; the names key the tensors on the
        servers, so every worker must use the same model.
      client: a connected ps.Client (e.g. ps.torch.connect_from_env()).
      overlap: send each gradient from backward as soon as it is final
        (default); False sends them all in ``step()``, as does a client with
        ps.torch.Embeddings (the module docstring's rule).
      keep_freed_memory: tell glibc's malloc to keep freed memory in the
        process (see ``keep_freed_memory()``); default True.
    """

    def __init__(self, named_parameters: Iterable[Tuple[str, torch.nn.Parameter]],
                 client: Client, *, overlap: bool = True,
                 keep_freed_memory: bool = True) -> None:
        named: List[Tuple[str, torch.nn.Parameter]] = list(named_parameters)
        if not named:
            raise ValueError("DistributedOptimizer: no parameters")
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            raise ValueError("DistributedOptimizer: parameter names are not unique")
        for n, p in named:
            if p.dtype != torch.float32:
                raise TypeError(f"parameter {n!r}: dtype {p.dtype}, expected torch.float32")
            if p.device.type != "cpu":
                raise ValueError(f"parameter {n!r}: on {p.device}, expected the CPU")
        super().__init__([p for _, p in named], {})  # no defaults: the servers optimize
        if keep_freed_memory:
            _keep_freed()
        self._client = client
        self._named = named
        # The servers' weights land in these buffers, not in the parameters:
        # backward may still read a parameter after its gradient went out.
        # step() then swaps each buffer with its parameter's storage
        # (p.data), so that no weight is copied and the old storage is the
        # next step's buffer.
        self._weights: Dict[str, Float32Array] = OrderedDict(
            (n, np.empty(tuple(p.shape), np.float32)) for n, p in named)
        client.init(OrderedDict((n, p.detach().contiguous().numpy()) for n, p in named))
        client.pull(out=self._weights)
        self._load_weights()
        self._inflight: Optional[PushPullInProgress] = None
        self._sent: Set[str] = set()
        self._keep: List[torch.Tensor] = []  # gradients sent as copies
        self._grad_accs: List[Any] = []  # the hooked accumulators: kept, or the hooks go
        if overlap:
            for n, p in named:
                if p.requires_grad:
                    grad_fn = p.expand_as(p).grad_fn
                    assert grad_fn is not None  # p requires grad
                    acc = grad_fn.next_functions[0][0]
                    acc.register_hook(self._hook(n, p))
                    self._grad_accs.append(acc)

    @property
    def client(self) -> Client:
        return self._client

    def _hook(self, name: str, p: torch.nn.Parameter) -> Callable[..., None]:
        def hook(*_: object) -> None:
            # With Embeddings on the client, step() sends it after the rows.
            if p.grad is not None and not _has_embeddings(self._client):
                self._send(name, p.grad)
        return hook

    def _send(self, name: str, grad: torch.Tensor) -> None:
        if name in self._sent:
            raise RuntimeError(
                f"DistributedOptimizer: the gradient of {name!r} was produced twice before "
                "step(); call step() after every backward() (gradient accumulation over "
                "several backward passes is not supported)")
        if self._inflight is None:
            self._inflight = self._client.start_push_pull(self._weights)
        g = grad.detach()
        if not g.is_contiguous():
            g = g.contiguous()
            self._keep.append(g)
        self._inflight.send(name, g)
        self._sent.add(name)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As torch.optim.Optimizer.zero_grad, with set_to_none=True by default
        (torch's default from 2.0 on): backward then hands over fresh
        gradients instead of adding them into zeroed ones, which saves a pass
        over every gradient per step."""
        super().zero_grad(set_to_none=set_to_none)

    def _load_weights(self) -> None:
        """Makes the buffers' new weights the parameters' and the parameters'
        old storage the buffers (a copy where a parameter is not contiguous)."""
        with torch.no_grad():
            for n, p in self._named:
                new = torch.from_numpy(self._weights[n])
                old = p.data
                if old.is_contiguous():
                    p.data = new
                    self._weights[n] = old.numpy()  # float32, as the parameter
                else:
                    p.copy_(new)

    def _pull(self, min_version: int) -> None:
        """Loads the servers' weights of version min_version or later."""
        self._client.pull(min_version, out=self._weights)
        self._load_weights()

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:
        """Sends the gradients backward has not sent (zeros for a parameter
        without one), waits for the servers' new weights and loads them into
        the parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for n, p in self._named:
            if n not in self._sent:
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                if p.grad is None:
                    self._keep.append(g)
                self._send(n, g)
        assert self._inflight is not None  # every parameter was sent above
        try:
            self._inflight.wait()
        finally:
            self._inflight = None
            self._sent.clear()
            self._keep.clear()
        self._load_weights()
        return loss


class _Rows(torch.autograd.Function):
    """Embedding's lookup: forward pulls the rows of `ids`, backward pushes
    their gradient rows."""

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, anchor: torch.Tensor,  # type: ignore[override]
                emb: Embedding) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.emb = emb
        rows = emb._lookup(ids.reshape(-1))
        return torch.from_numpy(rows).reshape(*ids.shape, emb.dim)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[None, None, None]:  # type: ignore[override]
        ids, = ctx.saved_tensors
        emb = ctx.emb
        g = grad.reshape(-1, emb.dim)
        if g.dtype != torch.float32:
            g = g.float()
        emb._push(ids.reshape(-1), g.contiguous())
        return None, None, None


class Embedding(torch.nn.Module):
    """A lookup in embedding table `table` of the parameter servers.

    forward(ids) takes an integer tensor of any shape (ids >= 0; repeats
    allowed) and returns the float32 rows, shape (*ids.shape, dim), pulled
    from the servers (each distinct id once); when autograd is on, backward
    pushes the gradient of every position's row (the rows of a repeated id
    summed) and the servers' sparse optimizer applies it (sync: at the close
    of the step, with the dense gradients). The module has no parameters:
    the rows live on the servers.

    Construct it before DistributedOptimizer (or client.init): it declares
    the table on `client` (appending it to the tables declared so far, so
    every worker must build its Embeddings in the same order), unless the
    client already declared `table`, with the same dim. Sync mode: call each
    table's Embedding once per step (look all of a step's ids up in one call:
    a second push of a table in a step raises ps.FailedPrecondition), and let
    DistributedOptimizer send the dense gradients (the module docstring's
    rule); a hand-written loop calls client.push_pull after backward.

    Args:
      table: the table's name on the servers.
      dim: floats per row.
      client: a connected ps.Client, before init unless it declared `table`.
      seed, init_scale: new rows are uniform in [-init_scale, init_scale),
        drawn from (seed, id).
      reuse_rows: sync mode only (elsewhere it does nothing): backward
        pushes the rows with ``client.start_push_pull_rows``, which also
        brings back the rows of those ids as the step closes them, and the
        next forward takes the ids it finds there from them instead of
        pulling them (in sync, rows change only when a step closes, so they
        are exactly what a pull would answer). Worth it when batches repeat
        ids from one step to the next (small vocabularies): a forward whose
        ids all repeat makes no call. Costs the bytes of those rows each
        step whether they are used or not.
    """

    def __init__(self, table: str, dim: int, client: Client, *, seed: int = 0,
                 init_scale: float = 0.01, reuse_rows: bool = False) -> None:
        super().__init__()
        spec = Table(table, dim, seed, init_scale)
        declared = {t.name: t for t in client.tables}
        if table in declared:
            if declared[table].dim != dim:
                raise ValueError(f"Embedding {table!r}: dim {dim}, but the client declared the "
                                 f"table with dim {declared[table].dim}")
        else:
            if client.names:
                raise ValueError(f"Embedding {table!r}: construct it before "
                                 "DistributedOptimizer (client.init), which declares the "
                                 "tables to the servers")
            client.declare_tables(client.tables + [spec])
        self.table, self.dim, self.client = table, int(dim), client
        self.reuse_rows = bool(reuse_rows)
        # reuse_rows: the push-pull of the last backward (its handle and
        # ids), then the rows it answered, by sorted distinct id, valid at
        # client.version == _cache_version.
        self._pending: Optional[Tuple[PushPullRowsInProgress, Any]] = None
        self._cache_ids: Any = np.empty(0, np.uint64)
        self._cache_rows: Float32Array = np.empty((0, self.dim), np.float32)
        self._cache_version = -1
        # The autograd Function's input that requires grad, so that backward
        # reaches it: empty, and not a parameter (nothing for the optimizer).
        self._anchor = torch.empty(0, requires_grad=True)
        _embeddings.setdefault(client, weakref.WeakSet()).add(self)

    def _reusing(self) -> bool:
        return self.reuse_rows and self.client.mode == "sync"

    def _push(self, ids: torch.Tensor, grads: torch.Tensor) -> None:
        if not self._reusing():
            self.client.push_rows(self.table, ids, grads)
            return
        if self._pending is not None:
            raise RuntimeError(f"Embedding {self.table!r}: a second backward before the step's "
                               "push_pull (sync: one lookup per table per step)")
        i = as_ids(self.table, ids)
        self._pending = (self.client.start_push_pull_rows(self.table, i, grads), i)

    def _lookup(self, ids: torch.Tensor) -> Float32Array:
        """The rows of `ids` (1-D): reuse_rows takes those the last step's
        push-pull brought back and pulls only the others."""
        if not self._reusing():
            return self.client.pull_rows(self.table, ids)
        if self._pending is not None:  # the step has closed: its rows are in
            handle, pushed = self._pending
            self._pending = None
            rows = handle.wait()
            self._cache_ids, first = np.unique(pushed, return_index=True)
            self._cache_rows = rows[first]
            self._cache_version = self.client.version
        i = as_ids(self.table, ids)
        if self._cache_version != self.client.version or not self._cache_ids.size:
            return self.client.pull_rows(self.table, i)
        at = np.minimum(np.searchsorted(self._cache_ids, i), self._cache_ids.size - 1)
        hit = self._cache_ids[at] == i
        if hit.all():
            out: Float32Array = self._cache_rows[at]
            return out
        out = np.empty((i.size, self.dim), np.float32)
        out[hit] = self._cache_rows[at[hit]]
        out[~hit] = self.client.pull_rows(self.table, i[~hit])
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor):
            ids = torch.as_tensor(ids)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"Embedding {self.table!r}: ids of dtype {ids.dtype}, expected an "
                            "integer tensor (torch.long)")
        rows: torch.Tensor = _Rows.apply(ids, self._anchor, self)
        return rows

    def extra_repr(self) -> str:
        return f"table={self.table!r}, dim={self.dim}"


class ElasticSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """This worker's share of each epoch of a dataset, by the job's
    membership in etcd, as ps_worker --coordinator takes it (docs/elastic.md,
    "Data shares"): the workers an epoch's record lists split one
    permutation of the dataset (seeded by `seed` and the epoch), the k-th of
    n taking its positions k, k + n, k + 2n, ..., steps * batch_size of
    them, where steps = max(1, len // n // batch_size) is the epoch's steps. While
    they all train the epoch through, every example of it is trained once.

    The optimizer's client must have a coordinator and ``data_shares=True``
    (it registers waiting: the sync steps do not wait for it before it has
    a share). One ``optimizer.step()`` per batch::

        sampler = ps.torch.ElasticSampler(len(train), 64, opt, epochs=3)
        loader = torch.utils.data.DataLoader(train, batch_size=64, sampler=sampler)
        while sampler.next_epoch():
            for x, y in loader: ...

    ``next_epoch()`` moves to the next epoch this worker has a share of: a
    worker that joined during an epoch waits for the next one (in sync mode
    the others wait for it there), then loads the weights of its first
    step. False once `epochs` epochs are done.
    """

    def __init__(self, dataset_len: int, batch_size: int, optimizer: DistributedOptimizer, *,
                 epochs: int, shuffle: bool = True, seed: int = 0) -> None:
        client = optimizer.client
        if client._member is None:
            raise ValueError("ElasticSampler: the client has no coordinator")
        if dataset_len < 1 or batch_size < 1 or epochs < 1:
            raise ValueError("ElasticSampler: dataset_len, batch_size and epochs must be >= 1")
        self._member = client._member
        self._optimizer = optimizer
        self._len, self._batch, self._epochs = int(dataset_len), int(batch_size), int(epochs)
        self._shuffle, self._seed = shuffle, int(seed)
        # (epoch, first_step, rank, workers, steps) of the epoch being
        # trained; steps by JobMember's rule.
        self._share: Optional[Tuple[int, int, int, int, int]] = None

    @property
    def share(self) -> Tuple[int, int, int, int]:
        """(epoch, first_step, rank, workers) of the epoch being trained."""
        return self._current()[:4]

    def _current(self) -> Tuple[int, int, int, int, int]:
        if self._share is None:
            raise RuntimeError("ElasticSampler: call next_epoch() first")
        return self._share

    def next_epoch(self) -> bool:
        args = (self._len, self._batch, self._epochs)
        if self._share is None:
            client = self._optimizer.client
            step = client.version if client.mode == "sync" else 0
            share = self._member.share_at(step, *args)
        else:
            epoch, first, _, workers, steps = self._share
            step = first + steps
            share = self._member.next_share(epoch, first, workers, *args)
        if share[0] >= self._epochs:
            return False
        if share[1] > step:  # joined: the weights of the share's first step
            sync = self._optimizer.client.mode == "sync"
            self._optimizer._pull(share[1] if sync else 0)
        self._share = share
        return True

    def __len__(self) -> int:
        return self._current()[4] * self._batch

    def __iter__(self) -> Iterator[int]:
        epoch, _, rank, workers = self.share
        if self._shuffle:
            g = torch.Generator()
            g.manual_seed(self._seed * 1_000_003 + epoch)
            perm = torch.randperm(self._len, generator=g)
        else:
            perm = torch.arange(self._len)
        taken = perm[rank::workers][:len(self)]
        return iter(taken.tolist())
