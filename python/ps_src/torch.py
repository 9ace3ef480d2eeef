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

Parameters must be float32 tensors on the CPU. Call ``step()`` after every
``backward()``: a gradient produced twice before ``step()`` (gradient
accumulation over several backward passes) raises RuntimeError. With
``overlap`` a gradient is on its way once backward produced it, so code
that changes gradients between ``backward()`` and ``step()`` (clipping,
scaling) must run with ``overlap=False``.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Dict, Iterable, List, Optional, Set, Tuple

import numpy as np
import torch

from . import Client, PushPullInProgress
from . import connect_from_env  # noqa: F401  (re-exported: ps.torch.connect_from_env)

__all__ = ["DistributedOptimizer", "connect_from_env", "keep_freed_memory"]


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
    against 4-81 with this setting (varying with the machine's load). It sets M_MMAP_THRESHOLD to 32 MB (blocks
    below it come from the heap) and M_TRIM_THRESHOLD to 1 GB (the heap
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
        (default); False sends them all in ``step()``.
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
        super().__init__([p for _, p in named], defaults={})
        if keep_freed_memory:
            _keep_freed()
        self._client = client
        self._named = named
        # The servers' weights land in these buffers, not in the parameters:
        # backward may still read a parameter after its gradient went out.
        # step() then swaps each buffer with its parameter's storage
        # (p.data), so that no weight is copied and the old storage is the
        # next step's buffer.
        self._weights: Dict[str, np.ndarray] = OrderedDict(
            (n, np.empty(tuple(p.shape), np.float32)) for n, p in named)
        client.init(OrderedDict((n, p.detach().contiguous().numpy()) for n, p in named))
        client.pull(out=self._weights)
        self._load_weights()
        self._inflight: Optional[PushPullInProgress] = None
        self._sent: Set[str] = set()
        self._keep: List[torch.Tensor] = []  # gradients sent as copies
        self._grad_accs = []  # the hooked accumulators: kept, or the hooks go
        if overlap:
            for n, p in named:
                if p.requires_grad:
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(self._hook(n, p))
                    self._grad_accs.append(acc)

    @property
    def client(self) -> Client:
        return self._client

    def _hook(self, name: str, p: torch.nn.Parameter):
        def hook(*_):
            if p.grad is not None:
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
                    self._weights[n] = old.numpy()
                else:
                    p.copy_(new)

    @torch.no_grad()
    def step(self, closure=None):
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
        try:
            self._inflight.wait()
        finally:
            self._inflight = None
            self._sent.clear()
            self._keep.clear()
        self._load_weights()
        return loss
