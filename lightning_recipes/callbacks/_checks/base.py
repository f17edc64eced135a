"""Shared base of the sanity checks: the result record, the error, and the callback shell every check uses."""

from __future__ import annotations

import math
import time
import warnings
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from typing_extensions import override

from lightning_recipes.callbacks._checks.batches import Key
from lightning_recipes.callbacks._checks.context import (
    CheckContext,
    CheckSkipped,
    context_from_trainer,
    preserved_rng,
)

__all__ = ["STATUSES", "CheckResult", "PreflightError", "SanityCheck", "enforce"]

Status = Literal["pass", "warn", "fail", "skip"]
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "skip")
ON_FAIL = ("raise", "warn")


@dataclass
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check's short name (``"init_loss"``, ``"grad_flow"``, ...).
        status: ``"pass"``, ``"warn"`` (suspicious, training may still be fine), ``"fail"`` (a bug that makes
            training silently worse) or ``"skip"`` (the check could not run on this model; the message says why).
        message: What was measured, what was expected, the likely causes and what to try.
        details: JSON-serialisable numbers behind the message (measured/expected values, curves, names).
        seconds: Wall time the check took.

    Example:
        >>> r = CheckResult("init_loss", "pass", "loss 2.30 ≈ ln 10", {"measured": 2.30})
        >>> r.failed, r.to_dict()["status"]
        (False, 'pass')
    """

    name: str
    status: Status
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"`status` must be one of {STATUSES}, got {self.status!r}.")

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "details": _jsonable(self.details),
            "seconds": round(self.seconds, 4),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return cls(
            name=str(data.get("name", "?")),
            status=data.get("status", "skip"),
            message=str(data.get("message", "")),
            details=dict(data.get("details", {})),
            seconds=float(data.get("seconds", 0.0)),
        )


class PreflightError(RuntimeError):
    """Raised when a sanity check fails and ``on_fail="raise"``; ``.results`` holds the failing results.

    Example:
        >>> error = PreflightError([CheckResult("grad_flow", "fail", "2 parameters get no gradient")])
        >>> print(error)
        1 preflight check(s) failed:
        - grad_flow: 2 parameters get no gradient
    """

    def __init__(self, results: list[CheckResult], note: str = "") -> None:
        self.results = results
        lines = [f"{len(results)} preflight check(s) failed:" if results else "a preflight check failed:"]
        lines += [f"- {r.name}: {r.message}" for r in results]
        if note:
            lines.append(note)
        super().__init__("\n".join(lines))


class SanityCheck(Callback):
    """Base of every ``*Check`` callback: run once at ``on_fit_start`` on copies, then act on the result.

    Subclasses implement :meth:`check`. The same object works three ways: in ``Trainer(callbacks=[...])``,
    inside :class:`~lightning_recipes.callbacks.Preflight`, and through :func:`lightning_recipes.preflight`.
    """

    name: ClassVar[str] = "check"

    def __init__(
        self, *, on_fail: Literal["raise", "warn"] = "raise", input_key: Key = None, target_key: Key = None
    ) -> None:
        if on_fail not in ON_FAIL:
            raise ValueError(f"`on_fail` must be one of {ON_FAIL}, got {on_fail!r}.")
        self.on_fail = on_fail
        self.input_key = input_key
        self.target_key = target_key
        self.result: CheckResult | None = None
        self.failed_on_any_rank = False  # the collective decision, set when run as a callback

    @abstractmethod
    def check(self, context: CheckContext) -> CheckResult:
        """Run the check on copies from ``context``; raise :class:`CheckSkipped` when it cannot."""

    def run(self, context: CheckContext) -> CheckResult:
        """:meth:`check` inside an isolated, seeded RNG state, timed; errors in user code become ``skip``."""
        started = time.perf_counter()
        saved_keys = (context.input_key, context.target_key)
        if self.input_key is not None:
            context.input_key = self.input_key
        if self.target_key is not None:
            context.target_key = self.target_key
        try:
            with preserved_rng():
                torch.manual_seed(context.seed)
                result = self.check(context)
        except CheckSkipped as reason:
            result = CheckResult(self.name, "skip", f"skipped: {reason}")
        except Exception as err:  # the user's code raised on our copy: report it, never crash the run
            result = CheckResult(
                self.name,
                "skip",
                f"could not run ({type(err).__name__}: {err}). The check runs `training_step`/`forward` on a "
                "copy of the module with no Trainer attached; pass the inputs/targets keys or skip this check.",
                {"error": f"{type(err).__name__}: {err}"},
            )
        finally:
            context.input_key, context.target_key = saved_keys
        result.seconds = time.perf_counter() - started
        self.result = result
        return result

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.result is not None or trainer.ckpt_path is not None:
            return  # checks describe a fresh run; a resumed run already passed them
        context = context_from_trainer(
            trainer, pl_module, input_key=self.input_key, target_key=self.target_key
        )
        result = unsupported_strategy(trainer, self.name) or self.run(context)
        self.result = result
        log_results(trainer, [result])
        self.failed_on_any_rank = enforce(trainer, [result], self.on_fail)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"result": None if self.result is None else self.result.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        result = state_dict.get("result")
        self.result = None if result is None else CheckResult.from_dict(result)


def unsupported_strategy(trainer: pl.Trainer, name: str) -> CheckResult | None:
    """A ``skip`` result under sharded strategies, where a deep copy of a module is not a usable model."""
    strategy = type(trainer.strategy).__name__
    if any(word in strategy for word in ("FSDP", "DeepSpeed", "ModelParallel")):
        return CheckResult(
            name,
            "skip",
            f"skipped under {strategy}: the parameters are sharded, so a copy is not a runnable model. Run "
            "`lightning_recipes.preflight(model, ...)` on the unsharded model before fitting.",
        )
    return None


def enforce(trainer: pl.Trainer, results: list[CheckResult], on_fail: str) -> bool:
    """Reduce "any check failed" across ranks (one collective call), then raise on every rank or warn.

    Returns whether a check failed on any rank.
    """
    failures = [r for r in results if r.failed]
    any_failed = bool(trainer.strategy.reduce_boolean_decision(bool(failures), all=False))
    if not any_failed:
        return False
    note = "" if failures else f"(rank {trainer.global_rank} passed; the failure is on another rank)"
    if on_fail == "raise":
        raise PreflightError(failures, note)
    if failures:
        prefix = f"[rank {trainer.global_rank}] " if trainer.world_size > 1 else ""
        warnings.warn(prefix + str(PreflightError(failures)), stacklevel=2)
    else:
        rank_zero_warn(f"a preflight check failed on another rank {note}")
    return True


@rank_zero_only
def log_results(trainer: pl.Trainer, results: list[CheckResult]) -> None:
    """Log each result's ``measured`` value as ``preflight/<name>`` to the Trainer's loggers."""
    metrics = {
        f"preflight/{r.name}": float(r.details["measured"])
        for r in results
        if isinstance(r.details.get("measured"), (int, float)) and math.isfinite(r.details["measured"])
    }
    if not metrics:
        return
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=0)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
