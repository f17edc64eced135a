"""The LR range test's arguments as one frozen record (:class:`SweepArgs`), checked once; below both
``recipe.py`` and ``tune/``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lightning_recipes._validation import check_choice, check_in_range, check_int, check_positive

__all__ = ["RULES", "WARMUP_FACTOR", "Rule", "SweepArgs"]

#: The rules that pick an LR from the sweep's curve (:mod:`lightning_recipes.tune.suggest`).
Rule = Literal["min_div_10", "steepest"]
#: The names of the rules (the values of :data:`Rule`).
RULES: tuple[str, ...] = get_args(Rule)

#: The peak LR of a warm-up schedule as a multiple of the ``min_div_10`` suggestion (see the tuning guide).
WARMUP_FACTOR = 5.0


@dataclass(frozen=True)
class SweepArgs:
    """The arguments of one LR range test (:func:`~lightning_recipes.tune.find_lr`), checked when built.

    Example:
        >>> args = SweepArgs(num_steps=50)
        >>> args.num_steps, args.min_lr, args.rule
        (50, 1e-07, 'min_div_10')
        >>> SweepArgs.from_mapping({"num_steps": 50}) == args, SweepArgs.from_mapping(None) == SweepArgs()
        (True, True)
    """

    #: The first LR of the sweep (for the group with the largest LR), > 0.
    min_lr: float = 1e-7
    #: The last LR, > ``min_lr``; the sweep stops earlier when the loss diverges.
    max_lr: float = 10.0
    #: Sweep length, an int >= 10 (100 is Lightning's and fastai's default).
    num_steps: int = 100
    #: ``"min_div_10"`` or ``"steepest"``.
    rule: Rule = "min_div_10"
    #: Factor of the causal moving average that decides divergence, in [0, 1).
    smoothing: float = 0.9
    #: Stop when that average exceeds this multiple of its best, > 1.
    divergence: float = 4.0
    #: ``peak_lr = suggestion * warmup_factor`` (less for LAMB: ``tune.suggest.peak_factor``), > 0.
    warmup_factor: float = WARMUP_FACTOR
    #: Seed of the sweep's own RNG (isolated from the caller's).
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive("min_lr", self.min_lr)
        check_positive("max_lr", self.max_lr)
        if self.max_lr <= self.min_lr:
            raise ValueError(f"`max_lr` must be greater than `min_lr` ({self.min_lr}), got {self.max_lr}.")
        check_int("num_steps", self.num_steps, minimum=10)
        check_choice("rule", self.rule, RULES)
        check_in_range("smoothing", self.smoothing, 0.0, 1.0, high_open=True)
        check_in_range("divergence", self.divergence, 1.0, float("inf"), low_open=True)
        check_positive("warmup_factor", self.warmup_factor)
        check_int("seed", self.seed)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, args: Any, name: str = "lr_find") -> SweepArgs:
        """The record of ``args``, a mapping of some fields or ``None`` (``ValueError`` for a bad key)."""
        args = {} if args is None else args
        if not isinstance(args, Mapping):
            raise ValueError(
                f"`{name}` must be a mapping of the LR range test's arguments {cls.field_names()} or None, "
                f"got {args!r}."
            )
        unknown = sorted(set(args) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"`{name}` has unknown key(s) {unknown}; allowed: {cls.field_names()}.")
        return cls(**args)

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (what an ``lr="find"`` checkpoint keeps)."""
        return dataclasses.asdict(self)
