"""Tensors as the extension takes them: the types the package's API names,
and the checks and conversions of arrays, CPU torch tensors and ids, which
name the tensor at fault before anything is sent."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Tuple, Union, cast

import numpy as np
import numpy.typing as npt


class _CpuTensor(Protocol):
    """What ps takes of a torch tensor (CPU only): its numpy view, t.numpy()."""

    @property
    def device(self) -> Any: ...

    def detach(self) -> _CpuTensor: ...

    def numpy(self) -> Any: ...


Float32Array = npt.NDArray[np.float32]
"""A numpy float32 array: weights come back as these."""
TensorLike = Union[Float32Array, _CpuTensor]
"""What a tensor may be given as: a float32 numpy array or a CPU torch tensor."""
Tensors = Mapping[str, TensorLike]
"""Tensors by name, in the model's order."""


def _numpy(what: str, value: object) -> object:
    """A torch tensor's numpy view (refusing one off the CPU); anything else unchanged."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        t = cast(_CpuTensor, value)
        if getattr(t, "device", None) is not None and str(t.device) != "cpu":
            raise ValueError(f"{what}: on {t.device}, expected a CPU tensor")
        return cast(object, t.detach().numpy())
    return value


def float_array(what: str, value: object, shape: Optional[Tuple[int, ...]]) -> Float32Array:
    """`value` (a numpy array or a CPU tensor) as a float32 C-contiguous array, unchanged."""
    value = _numpy(what, value)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{what}: expected a numpy array or a CPU tensor, "
                        f"got {type(value).__name__}")
    if value.dtype != np.float32:
        raise TypeError(f"{what}: dtype {value.dtype}, expected float32")
    if not value.flags["C_CONTIGUOUS"]:
        raise ValueError(f"{what}: not C-contiguous (use np.ascontiguousarray)")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"{what}: shape {tuple(value.shape)}, expected {tuple(shape)}")
    return cast(Float32Array, value)


def tensor_array(name: str, value: object, shape: Optional[Tuple[int, ...]]) -> Float32Array:
    return float_array(f"tensor {name!r}", value, shape)


def as_ids(table: str, ids: object) -> npt.NDArray[np.uint64]:
    """`ids` (any 1-D integer array-like or CPU tensor) as a C-contiguous uint64
    array: a view of a C-contiguous int64 or uint64 array, a copy otherwise.
    ValueError for a negative id."""
    what = f"ids of table {table!r}"
    a: npt.NDArray[Any] = np.asarray(_numpy(what, ids))
    if a.size == 0 and a.dtype.kind == "f":  # np.asarray([]) is float64
        a = a.astype(np.uint64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what}: dtype {a.dtype}, expected integers (uint64 or int64)")
    if a.ndim != 1:
        raise ValueError(f"{what}: shape {a.shape}, expected one dimension")
    if a.dtype.kind == "i":
        if a.size and a.min() < 0:
            raise ValueError(f"{what}: id {int(a[np.argmax(a < 0)])} is negative")
        if a.dtype == np.int64:  # the same bits as uint64 for ids >= 0
            return np.ascontiguousarray(a).view(np.uint64)
    return np.ascontiguousarray(a, dtype=np.uint64)
