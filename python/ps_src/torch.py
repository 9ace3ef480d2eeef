"""ps.torch: train a PyTorch model on the parameter servers.

A single-process script adopts it in a few lines::

    import ps.torch
    client = ps.torch.connect_from_env()
    opt = ps.torch.DistributedOptimizer(model.named_parameters(), client)
    # the loop is unchanged: opt.zero_grad(); loss.backward(); opt.step()

At construction worker 0 creates the parameters on the servers from the
model's current values, and every other worker copies the servers' values
into its parameters, so all workers start equal. ``step()`` sends every
parameter's gradient in one push-pull and writes the new weights into the
parameters in place; the servers' optimizer (``ps_server --lr``) makes the
update, in sync or async mode as the servers run. Only parameters are
shared: buffers (BatchNorm's running statistics) stay local to each worker.

Parameters must be float32 tensors on the CPU. Not yet: starting each
gradient's exchange during ``backward()`` (the gradients go out together in
``step()``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, List, Tuple

import torch

from . import Client
from . import connect_from_env  # noqa: F401  (re-exported: ps.torch.connect_from_env)

__all__ = ["DistributedOptimizer", "connect_from_env"]


class DistributedOptimizer(torch.optim.Optimizer):
    """A torch.optim.Optimizer whose update is made by the parameter servers.

    Args:
      named_parameters: the model's (name, parameter) pairs, e.g.
        ``model.named_parameters()``; the names key the tensors on the
        servers, so every worker must use the same model.
      client: a connected ps.Client (e.g. ps.torch.connect_from_env()).
    """

    def __init__(self, named_parameters: Iterable[Tuple[str, torch.nn.Parameter]],
                 client: Client) -> None:
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
        client.init(OrderedDict((n, p.detach().contiguous().numpy()) for n, p in named))
        self._copy_in(client.pull())

    @property
    def client(self) -> Client:
        return self._client

    def _copy_in(self, weights) -> None:
        with torch.no_grad():
            for n, p in self._named:
                p.copy_(torch.from_numpy(weights[n]))

    @torch.no_grad()
    def step(self, closure=None):
        """Sends the gradients (zeros for a parameter without one) and loads
        the servers' new weights into the parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads = OrderedDict()
        for n, p in self._named:
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            grads[n] = g.detach().contiguous().numpy()
        self._copy_in(self._client.push_pull(grads))
        return loss
