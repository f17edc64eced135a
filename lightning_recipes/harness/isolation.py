"""How a trial run leaves nothing of the caller's changed (RNG states, loader generators, threads, module),
and the harness's one exception, :class:`CannotRunOnCopy`."""

from __future__ import annotations

import contextlib
import copy
import logging
import random
import warnings
from collections.abc import Callable, Generator, Iterable
from typing import Any, TypeVar

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
    "seed_all",
    "seeded",
]


class CannotRunOnCopy(Exception):
    """The user's model cannot be tried on a copy; the message says why, in a sentence (the checks report a
    ``skip`` with it, ``find_lr`` and ``lr="find"`` a ``ValueError``).

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
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    cuda_states = torch.cuda.get_rng_state_all() if cuda else []
    torch_state, python_state, numpy_state = torch.get_rng_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        torch.set_rng_state(torch_state)
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        if cuda:
            torch.cuda.set_rng_state_all(cuda_states)


def loader_generators(loader: Any) -> list[torch.Generator]:
    """The ``torch.Generator`` objects a loader draws from (its own, its sampler's, its batch sampler's)."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    owners = (loader, getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None))
    found = [g for owner in owners if isinstance(g := getattr(owner, "generator", None), torch.Generator)]
    return [g for i, g in enumerate(found) if all(g is not other for other in found[:i])]


@contextlib.contextmanager
def preserved_loader_rng(loader: Iterable[Any], seed: int | None = None) -> Generator[None, None, None]:
    """Iterate ``loader`` inside the block and leave every RNG it touches (global and its own) as it was;
    ``seed``: seed its own generators with it inside the block (what is read is then independent of how far a
    Trainer drew from them before)."""
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
    """A trial Trainer's fit on a copy, silent: no warnings and no banners ("GPU available ...", "`max_steps`
    reached"); errors still raise and log."""
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
    """A deep copy of ``model`` on ``device``, in train mode, with no Trainer attached, not compiled (a copied
    ``module.compile()`` call would run the original); the objects in ``shared`` (the Trainer, a datamodule,
    the loaders) are shared, not copied. Raises what ``copy.deepcopy`` raises."""
    memo: dict[int, Any] = {id(obj): obj for obj in shared if obj is not None}
    clone = copy.deepcopy(model, memo)
    for module in clone.modules():
        if getattr(module, "_compiled_call_impl", None) is not None:
            module._compiled_call_impl = None
    clone.trainer = None
    clone.to(device)
    clone.train()
    return clone


T = TypeVar("T")


def seed_all(seed: int) -> None:
    """The same random draws in every replay of a step (torch, Python and NumPy generators)."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def seeded(seed: int, run: Callable[..., T], *args: Any) -> T:
    """``run(*args)`` after ``torch.manual_seed(seed)``: identical randomness in passes being compared."""
    torch.manual_seed(seed)
    return run(*args)
