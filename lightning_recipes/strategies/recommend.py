"""``recommend_strategy``: the simplest rung of the DDP -> ZeRO-1/2 -> FSDP/ZeRO-3 -> offload ladder that
fits."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightning.pytorch.strategies import Strategy
from torch import nn

from lightning_recipes._blocks import BlockSpec, block_classes_for
from lightning_recipes._console import new_table
from lightning_recipes._names import LADDERS
from lightning_recipes._validation import check_choice, check_in_range, check_positive
from lightning_recipes.strategies._layout import GIB, autocast_dtype
from lightning_recipes.strategies.memory import (
    MemoryEstimate,
    estimate_memory,
    measure_activations,
    render,
)
from lightning_recipes.strategies.presets import PRESETS

__all__ = ["LADDERS", "Recommendation", "recommend_strategy"]


@dataclass(frozen=True)
class Recommendation:
    """The chosen preset (``None`` when nothing fits) and the estimate of every rung that justifies it."""

    preset: str | None
    estimates: tuple[MemoryEstimate, ...]
    fits: tuple[bool, ...]
    device_memory_gb: float
    headroom: float
    host_memory_gb: float | None

    @property
    def estimate(self) -> MemoryEstimate | None:
        """The estimate of the chosen rung."""
        return next((estimate for estimate in self.estimates if estimate.strategy == self.preset), None)

    def strategy(self, **overrides: Any) -> Strategy:
        """Build the recommended preset (see :func:`~lightning_recipes.strategies.preset`).

        Raises:
            RuntimeError: When nothing fits.
        """
        if self.preset is None:
            raise RuntimeError(f"No preset fits:\n{self}")
        from lightning_recipes.strategies.presets import preset

        return preset(self.preset, **overrides)

    def table(self) -> Any:
        budget = self.device_memory_gb * (1 - self.headroom)
        first = self.estimates[0]
        table = new_table(
            (
                f"{first.num_params:,} params, {first.optimizer}, {first.precision}, {first.devices} "
                f"device(s) x {first.num_nodes} node(s); budget {budget:.1f} of {self.device_memory_gb:g} "
                "GiB per device"
            ),
            title_justify="left",
            fitting=True,
        )
        table.add_column("preset", no_wrap=True)
        for column in ("params", "grads", "optim", "master", "gathered", "activ.", "total", "host/node"):
            table.add_column(column, justify="right")
        table.add_column("fits", no_wrap=True)
        for estimate, fits in zip(self.estimates, self.fits):
            cells = [value for _, value in estimate.rows()[:-1]] + [estimate.host * estimate.devices]
            mark = "chosen" if estimate.strategy == self.preset else ("yes" if fits else "no")
            table.add_row(estimate.strategy, *("-" if c is None else f"{c / GIB:.2f}" for c in cells), mark)
        return table

    def notes(self) -> list[str]:
        """What the table leaves out or assumes, in words: printed under it by ``str()``.

        Example:
            >>> rec = recommend_strategy(7_000_000_000, devices=8, device_memory_gb=80)
            >>> any(note.startswith("activations not counted") for note in rec.notes())
            True
        """
        notes = ["sizes in GiB per device; host/node = offloaded bytes of all local processes"]
        if any(estimate.activations is None for estimate in self.estimates):
            notes.append(
                "activations not counted ('-' in activ.): pass a model and `sample_batch=` to"
                " recommend_strategy to measure them; until then leave room for them beyond the headroom"
            )
        if self.host_memory_gb is None and any(estimate.host for estimate in self.estimates):
            notes.append(
                "offload rows not checked against host memory: pass `host_memory_gb=` (CLI: --host_memory),"
                " the host RAM of one training node"
            )
        for estimate in self.estimates:
            notes.extend(note for note in estimate.notes if note not in notes)
        return notes

    def verdict(self) -> str:
        """The last line of ``str()``: the recommended preset, or what to change when nothing fits."""
        if self.preset:
            return f"recommended: recipes_{self.preset}"
        return (
            "nothing fits: add devices or nodes, lower the batch size, enable activation checkpointing,"
            " or use a 16-bit precision"
        )

    def __str__(self) -> str:
        return render(self.table(), *self.notes(), self.verdict())


def recommend_strategy(
    model_or_num_params: nn.Module | int,
    *,
    devices: int,
    device_memory_gb: float,
    num_nodes: int = 1,
    optimizer: str | None = None,
    precision: str = "bf16-mixed",
    family: str = "fsdp",
    headroom: float = 0.15,
    host_memory_gb: float | None = None,
    sample_batch: Any = None,
    block_classes: BlockSpec | None = None,
    forward_fn: Callable[[nn.Module, Any], Any] | None = None,
) -> Recommendation:
    """Pick the simplest preset of the ``family`` ladder (:data:`LADDERS`) whose per-device estimate fits
    ``device_memory_gb`` with ``headroom`` to spare (and ``host_memory_gb``, when given). Other arguments
    as for :func:`~lightning_recipes.strategies.estimate_memory`.

    Example:
        >>> recommend_strategy(7_000_000_000, devices=8, device_memory_gb=80).preset
        'fsdp_shard_grad_op'
        >>> recommend_strategy(1_000_000_000, devices=8, device_memory_gb=80).preset
        'ddp'
    """
    check_choice("family", family, sorted(LADDERS))
    check_positive("device_memory_gb", device_memory_gb)
    check_in_range("headroom", headroom, 0.0, 1.0, high_open=True)
    if host_memory_gb is not None:
        check_positive("host_memory_gb", host_memory_gb)
    ladder = [name for name in LADDERS[family] if name != "fsdp_hybrid" or num_nodes > 1]
    measured = None
    if sample_batch is not None:
        if not isinstance(model_or_num_params, nn.Module):
            raise ValueError("`sample_batch` needs a model, not a parameter count, to measure activations.")
        blocks = block_classes_for(model_or_num_params, block_classes)
        measured = measure_activations(
            model_or_num_params,
            sample_batch,
            block_classes=blocks,
            forward_fn=forward_fn,
            autocast_dtype=autocast_dtype(precision),
        )
    estimates, fits, chosen = [], [], None
    for name in ladder:
        estimate = estimate_memory(
            model_or_num_params,
            optimizer=optimizer,
            precision=precision,
            strategy=name,
            devices=devices,
            num_nodes=num_nodes,
            block_classes=block_classes,
        )
        if measured is not None:
            checkpointing = PRESETS[name].layout.activation_checkpointing
            estimate = dataclasses.replace(estimate, activations=measured.total(checkpointing))
        ok = estimate.fits(device_memory_gb, headroom=headroom)
        if ok and estimate.host and host_memory_gb is not None:
            ok = estimate.host * devices <= host_memory_gb * GIB * (1 - headroom)
        estimates.append(estimate)
        fits.append(ok)
        if ok and chosen is None:
            chosen = name
    return Recommendation(
        preset=chosen,
        estimates=tuple(estimates),
        fits=tuple(fits),
        device_memory_gb=device_memory_gb,
        headroom=headroom,
        host_memory_gb=host_memory_gb,
    )
