"""How a trial run leaves nothing of the caller's changed (RNG states, loader generators, threads, module),
and the harness's one exception, :class:`CannotRunOnCopy`."""

from __future__ import annotations

import contextlib
import copy
import logging
import random
import warnings
from collections.abc import Generator, Iterable
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

__all__ = [
    "CannotRunOnCopy",
    "copy_module",
    "cpu_threads",
    "loader_generators",
    "preserved_loader_rng",
    "preserved_rng",
    "quiet_logging",
]


class CannotRunOnCopy(Exception):
    """Raised when the user's model cannot be tried on a copy; the message says why, in a sentence.

    Each caller decides what that means: the sanity checks report a ``skip`` with the message, ``find_lr``
    and ``lr="find"`` raise a ``ValueError``.

    Example:
        >>> raise CannotRunOnCopy("the module uses manual optimisation.")
        Traceback (most recent call last):
        ...
        lightning_recipes.harness.isolation.CannotRunOnCopy: the module uses manual optimisation.
    """


@contextlib.contextmanager
def preserved_rng() -> Generator[None, None, None]:
    """Restore the torch (CPU and initialised CUDA), numpy and Python RNG states on exit, even on error.

    Example:
        >>> import torch
        >>> before = torch.get_rng_state()
        >>> with preserved_rng():
        ...     _ = torch.rand(3)
        >>> torch.equal(before, torch.get_rng_state())
        True
    """
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if cuda:
        states["cuda"] = torch.cuda.get_rng_state_all()
    try:
        yield
    finally:
        torch.set_rng_state(states["torch"])
        random.setstate(states["python"])
        np.random.set_state(states["numpy"])
        if cuda:
            torch.cuda.set_rng_state_all(states["cuda"])


def loader_generators(loader: Any) -> list[torch.Generator]:
    """The ``torch.Generator`` objects a loader draws from (its own, its sampler's, its batch sampler's)."""
    found: list[torch.Generator] = []
    candidates = [
        getattr(loader, "generator", None),
        getattr(getattr(loader, "sampler", None), "generator", None),
        getattr(getattr(getattr(loader, "batch_sampler", None), "sampler", None), "generator", None),
    ]
    for generator in candidates:
        if isinstance(generator, torch.Generator) and all(generator is not g for g in found):
            found.append(generator)
    return found


@contextlib.contextmanager
def preserved_loader_rng(loader: Iterable[Any], seed: int | None = None) -> Generator[None, None, None]:
    """Iterate ``loader`` inside the block and leave every RNG it touches (global and its own) as it was.

    ``seed``: seed the loader's own generators with it inside the block, so that what is read does not
    depend on how far they were drawn before (a Trainer draws from them when it checks the loader)."""
    generators = loader_generators(loader)
    saved = [g.get_state() for g in generators]
    if seed is not None:
        for generator in generators:
            generator.manual_seed(seed)
    try:
        with preserved_rng():
            yield
    finally:
        for generator, state in zip(generators, saved):
            generator.set_state(state)


@contextlib.contextmanager
def quiet_logging() -> Generator[None, None, None]:
    """Silence the warnings ``self.log`` / ``self.trainer`` give on a module with no Trainer attached."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*self\.log.*")
        warnings.filterwarnings("ignore", message=r".*self\.trainer.*")
        yield


@contextlib.contextmanager
def quiet_trial() -> Generator[None, None, None]:
    """A trial Trainer's fit on a copy, silent: no warnings (Lightning's and torch's deprecations, the
    no-validation-loader notice) and no banners ("GPU available ...", "`max_steps` reached"); errors still
    raise and log."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric", "lightning")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@contextlib.contextmanager
def cpu_threads(num_threads: int | None, device: torch.device) -> Generator[None, None, None]:
    """torch's intra-op threads set to ``num_threads`` inside the block on a CPU (``None``: unchanged)."""
    saved = torch.get_num_threads()
    if num_threads is not None and device.type == "cpu":
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def copy_module(model: pl.LightningModule, shared: Iterable[Any], device: torch.device) -> pl.LightningModule:
    """A deep copy of ``model`` on ``device``, in train mode, with no Trainer attached, not compiled.

    Objects in ``shared`` that the module may hold a reference to (the Trainer, a datamodule holding the data,
    the loaders) are shared with the copy, not duplicated. A module compiled in place (``module.compile()``)
    runs its copy eagerly: the copied compiled call would run the original module. Raises what
    ``copy.deepcopy`` raises.
    """
    memo: dict[int, Any] = {id(obj): obj for obj in shared if obj is not None}
    clone = copy.deepcopy(model, memo)
    for module in clone.modules():
        if getattr(module, "_compiled_call_impl", None) is not None:
            module._compiled_call_impl = None
    clone.trainer = None  # a deep copy drops it already (LightningModule.__getstate__); be explicit
    clone.to(device)
    clone.train()
    return clone
