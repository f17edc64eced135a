"""Count host-device syncs, so that a test or a benchmark can prove a hot path has none.

Example:
    >>> import torch
    >>> from lightning_recipes.testing import HostSyncCounter
    >>> with HostSyncCounter() as counter:
    ...     _ = torch.ones(3).sum() * 2
    >>> counter.count
    0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HostSyncCounter"]


class HostSyncCounter(TorchDispatchMode):
    """Count the operations that read tensor values back to the host (a host-device sync on an accelerator).

    Counts ``aten::_local_scalar_dense`` (behind ``.item()``, ``bool()``, ``float()``, ``int()``, ``if
    tensor:``) through a dispatch mode, plus the Python entry points that bypass the dispatcher:
    ``Tensor.tolist``, ``Tensor.numpy``, ``Tensor.nonzero``/``torch.nonzero`` and ``torch.tensor(...)`` built
    from tensors (one per tensor element, as Lightning's ``grad_norm`` does). Works on CPU, so tests can prove
    "zero syncs". ``events`` keeps a label per sync; ``count`` is their number. Overhead: a Python call per
    dispatched op. On CPU it cannot tell a read of a host-only scalar (``torch.optim.AdamW``'s step counter:
    no sync on a GPU) from a device read, so compare against a bare run, or use an optimizer that reads none
    (SGD).

    Example:
        >>> with HostSyncCounter() as counter:
        ...     x = torch.ones(3).sum()
        ...     y = x * 2
        >>> counter.count
        0
        >>> with HostSyncCounter() as counter:
        ...     _ = float(torch.ones(3).sum()), torch.ones(2).tolist()
        >>> counter.count, counter.events
        (2, ['aten._local_scalar_dense.default', 'Tensor.tolist'])
    """

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []

    @property
    def count(self) -> int:
        return len(self.events)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.events.append(str(func))
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> HostSyncCounter:
        def wrap(owner: Any, name: str, label: str, counts: Callable[..., int]) -> None:
            original = getattr(owner, name)

            def patched(*args: Any, **kwargs: Any) -> Any:
                self.events.extend([label] * counts(*args, **kwargs))
                return original(*args, **kwargs)

            self._saved.append((owner, name, original))
            setattr(owner, name, patched)

        wrap(torch.Tensor, "tolist", "Tensor.tolist", lambda *a, **k: 1)
        wrap(torch.Tensor, "numpy", "Tensor.numpy", lambda *a, **k: 1)
        wrap(torch.Tensor, "nonzero", "Tensor.nonzero", lambda *a, **k: 1)
        wrap(torch, "nonzero", "torch.nonzero", lambda *a, **k: 1)
        wrap(torch, "tensor", "torch.tensor(tensors)", lambda data=None, *a, **k: _tensor_leaves(data))
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


def _tensor_leaves(data: Any) -> int:
    if isinstance(data, Tensor):
        return 0  # torch.tensor(tensor) copies on the device
    if isinstance(data, (list, tuple)):
        return sum(1 if isinstance(item, Tensor) else _tensor_leaves(item) for item in data)
    return 0
