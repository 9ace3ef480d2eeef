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
waits, and writes the servers' new weights into the parameters in place.
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

from collections import OrderedDict
from typing import Dict, Iterable, List, Optional, Set, Tuple

import numpy as np
import torch

from . import Client, PushPullInProgress
from . import connect_from_env  # noqa: F401  (re-exported: ps.torch.connect_from_env)

__all__ = ["DistributedOptimizer", "connect_from_env"]


class DistributedOptimizer(torch.optim.Optimizer):
    """A torch.optim.Optimizer whose update is made by the parameter servers.

    Args:
      named_parameters: the model's (name, parameter) pairs, e.g.
        ``model.named_parameters()``; the names key the tensors on the
        servers, so every worker must use the same model.
      client: a connected ps.Client (e.g. ps.torch.connect_from_env()).
      overlap: send each gradient from backward as soon as it is final
        (default); False sends them all in ``step()``.
    """

    def __init__(self, named_parameters: Iterable[Tuple[str, torch.nn.Parameter]],
                 client: Client, *, overlap: bool = True) -> None:
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
        self._client = client
        self._named = named
        # The servers' weights land here, then are copied into the
        # parameters in step(): backward may still read a parameter after
        # the last gradient went out, so they are not written in place
        # while the push-pull runs.
        self._weights: Dict[str, np.ndarray] = OrderedDict(
            (n, np.empty(tuple(p.shape), np.float32)) for n, p in named)
        client.init(OrderedDict((n, p.detach().contiguous().numpy()) for n, p in named))
        client.pull(out=self._weights)
        self._copy_in()
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

    def _copy_in(self) -> None:
        with torch.no_grad():
            for n, p in self._named:
                p.copy_(torch.from_numpy(self._weights[n]))

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
        self._copy_in()
        return loss
