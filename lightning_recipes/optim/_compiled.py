"""A cache of ``torch.compile``d single-tensor update kernels, with an eager fallback.

Each kernel is compiled once per process (``dynamic=True`` on 1-D views, so every tensor size shares one
graph; a new dtype or device adds one) and reused by every optimizer instance. When compilation is
unavailable or fails, :func:`compiled_kernel` returns ``None`` once a warning was issued and callers run
their eager path instead.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_warn

__all__ = ["compile_available", "compiled_kernel", "mark_failed"]

_KERNELS: dict[str, Callable[..., Any]] = {}
_FAILED: set[str] = set()


def compile_available() -> bool:
    """Whether ``torch.compile`` can run here: dynamo supports this Python, a C++ compiler exists for CPU
    kernels, compilation is not disabled, and we are not already inside a compiled region."""
    if os.environ.get("TORCHDYNAMO_DISABLE", "") in ("1", "true", "True"):
        return False
    if torch.compiler.is_compiling():
        return False
    if sys.platform == "win32" or not hasattr(torch, "compile"):
        return False
    return any(shutil.which(cxx) for cxx in ("g++", "c++", "clang++"))


def compiled_kernel(name: str, fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The process-wide compiled version of ``fn`` (``None`` if compiling is unavailable or failed)."""
    if name in _FAILED or not compile_available():
        return None
    kernel = _KERNELS.get(name)
    if kernel is None:
        kernel = torch.compile(fn, dynamic=True, fullgraph=True)
        _KERNELS[name] = kernel
    return kernel


def mark_failed(name: str, error: BaseException) -> None:
    """Stop using the compiled ``name`` kernel in this process and say why, once."""
    _FAILED.add(name)
    _KERNELS.pop(name, None)
    rank_zero_warn(
        f"lightning_recipes: compiling the `{name}` update failed ({type(error).__name__}: {error}); "
        "falling back to the eager implementation. Pass `implementation='for_loop'` or 'foreach' to skip "
        "the attempt."
    )
