"""The class every sanity check derives from, and the one users subclass to write their own."""

from __future__ import annotations

import inspect
import os
import time
import traceback
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal, TypedDict

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from lightning_recipes._validation import check_choice
from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET, BudgetExceeded, hard_limit, time_budget
from lightning_recipes.checks._options import ON_FAIL, PreflightOptions, TimeBudget, check_time_budget
from lightning_recipes.checks._runner import run_in_trainer
from lightning_recipes.checks.report import (
    SUMMARY_LIMIT,
    CheckInconclusive,
    CheckResult,
    CheckSkipped,
    PreflightReport,
    Status,
)
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key, check_key
from lightning_recipes.harness.isolation import preserved_rng

__all__ = [
    "CheckOptions",
    "SanityCheck",
    "perturbed",
]


def error_result(name: str, err: BaseException) -> CheckResult:
    """The ``error`` result of check ``name`` that raised ``err``, with where it was raised and what to do."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    action = "If your code raised it, pass `input_key`/`target_key` or leave this check out; else report it."
    if isinstance(err, RuntimeError) and "not attached to a `Trainer`" in str(err):
        user = next((f for f in reversed(frames) if "/lightning/" not in f.filename.replace("\\", "/")), None)
        line = f" ({user.filename}:{user.lineno}: `{user.line}`)" if user is not None and user.line else ""
        action = (
            f"Your code reads `self.trainer`{line}, and the check runs it on a copy with no Trainer: use "
            "`self.global_step`/`self.current_epoch`, or guard it with `if self._trainer is not None:`."
        )
    summary = f"the check raised {type(err).__name__} and says nothing about the model"
    details = {"error": f"{type(err).__name__}: {err}", "where": where}
    return CheckResult(name, "error", summary, details, action=action)


def _user_frame(err: BaseException, check: type) -> str | None:
    """``file:line`` of the innermost frame of ``err`` in the user's code; ``None``: the check's."""
    own = {os.path.abspath(inspect.getsourcefile(check) or ""), ""}
    for frame in reversed([f for f in traceback.extract_tb(err.__traceback__) if f.name not in _FORWARDS]):
        path = os.path.abspath(frame.filename)
        if path in own or path.startswith(_PACKAGE):
            return None
        if not frame.filename.startswith("<") and not any(part in path for part in _LIBRARIES):
            return f"{os.path.basename(path)}:{frame.lineno}"
    return None


_FORWARDS = ("__torch_function__", "__torch_dispatch__")  # a mode recording torch calls: its caller raised
_LARGER_BUDGET = "Give it a larger `time_budget=` (or None), or fewer steps/samples in its arguments."
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # lightning_recipes/
_LIBRARIES = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")


@contextmanager
def perturbed(what: str) -> Iterator[None]:
    """Run the user's code on an input the check changed; when it raises, the check is ``inconclusive``.

    Example:
        >>> from lightning_recipes.checks.report import CheckInconclusive
        >>> try:
        ...     with perturbed("empty sequences"):
        ...         raise ValueError("lengths must be > 0")
        ... except CheckInconclusive as abstained:
        ...     print(abstained)
        your code raised ValueError on empty sequences (lengths must be > 0), so this check cannot judge
    """
    try:
        yield
    except (CheckSkipped, CheckInconclusive, CannotRunOnCopy):
        raise
    except Exception as err:
        head = f"your code raised {type(err).__name__} on {what}"
        tail = ", so this check cannot judge"
        room = SUMMARY_LIMIT - len(head) - len(tail) - 3  # the summary stays one line of at most 120
        detail = str(err).splitlines()[0] if str(err) else ""
        detail = detail if len(detail) <= room else detail[: max(room - 1, 0)] + "…"
        raise CheckInconclusive(f"{head}{f' ({detail})' if room > 8 and detail else ''}{tail}") from err


class CheckOptions(TypedDict, total=False):
    """The keyword arguments every check takes (see :class:`SanityCheck`)."""

    on_fail: Literal["raise", "warn"]
    input_key: Key
    target_key: Key
    time_budget: TimeBudget


class SanityCheck(Callback):
    """Base of every ``*Check``: assert one invariant of a model and its data, once, on copies.

    Subclasses set ``name`` and implement :meth:`check`; it runs as a callback or in ``preflight(checks=)``.

    Args:
        on_fail: ``"raise"`` a :class:`PreflightError` or ``"warn"`` when a callback's check fails.
        input_key: Index or key of the input tensor in a batch (default: ``batch[0]`` or ``"x"``, ...).
        target_key: Index or key of the target tensor (default: ``batch[-1]`` or ``"y"``, ``"labels"``, ...).
        time_budget: Safety cap in seconds; ``None`` = none; ``"default"`` = the preflight's (30 s).

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import CheckContext, CheckResult, SanityCheck, preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> class FiniteLossCheck(SanityCheck):
        ...     name = "finite_loss"
        ...
        ...     def check(self, context: CheckContext) -> CheckResult:
        ...         model = context.copy_model()
        ...         with torch.no_grad():
        ...             loss = context.training_loss(model, context.train_batches(1)[0]).item()
        ...         status = "pass" if torch.isfinite(torch.tensor(loss)) else "fail"
        ...         return CheckResult(self.name, status, f"first loss {loss:.3f}", {"measured": loss})
        >>> report = preflight(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...                    checks=[FiniteLossCheck(), "init_loss"])
        >>> [(r.name, r.status) for r in report]
        [('finite_loss', 'pass'), ('init_loss', 'pass')]
    """

    name: ClassVar[str] = "check"

    def __init__(
        self,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        check_choice("on_fail", on_fail, ON_FAIL)
        check_key("input_key", input_key)
        check_key("target_key", target_key)
        check_time_budget("time_budget", time_budget, allow_default=True)
        self.on_fail, self.input_key, self.target_key = on_fail, input_key, target_key
        self.time_budget = time_budget
        self.result: CheckResult | None = None
        self.failed_on_any_rank = False  # the collective decision, set when run as a callback

    @abstractmethod
    def check(self, context: CheckContext) -> CheckResult:
        """Run the check on copies from ``context``; raise :class:`CheckSkipped` when it cannot."""

    def run(
        self, context: CheckContext, *, default_budget: float | None = DEFAULT_TIME_BUDGET
    ) -> CheckResult:
        """:meth:`check` seeded, RNG-isolated, timed and capped; user code raising: ``inconclusive``."""
        budget = self.resolved_budget(default_budget)
        started = time.perf_counter()
        saved_keys = (context.input_key, context.target_key)
        context.input_key = saved_keys[0] if self.input_key is None else self.input_key
        context.target_key = saved_keys[1] if self.target_key is None else self.target_key
        try:
            eager = torch.compiler.set_stance("force_eager")  # the model, not the compiler: no recompiles
            with preserved_rng(), time_budget(budget, context.model), eager:
                torch.manual_seed(context.seed)
                result = self.check(context)
        except BudgetExceeded:
            took = time.perf_counter() - started
            capped = {"stopped_by_budget": True, "time_budget_s": budget, "seconds": round(took, 3)}
            summary = f"stopped by its {budget:g} s safety cap after {took:.1f} s, before its work was done"
            result = self.verdict("inconclusive", summary, capped, action=_LARGER_BUDGET)
        except (CheckSkipped, CannotRunOnCopy) as reason:  # the check's own skip, or the harness's
            result = self.verdict("skip", f"skipped: {reason}")
        except CheckInconclusive as reason:
            result = self.verdict("inconclusive", str(reason), {"abstained": str(reason)})
        except Exception as err:  # the check raised (an error), or the user's code it ran on a copy (abstain)
            result = error_result(self.name, err)
            if (where := _user_frame(err, type(self))) is not None:
                said = f"your code raised {type(err).__name__} at {where} on a copy outside the Trainer"
                details = {**result.details, "abstained": "user code raised"}
                result = self.verdict("inconclusive", said[:SUMMARY_LIMIT], details, action=result.action)
        finally:
            context.input_key, context.target_key = saved_keys
        result.seconds = time.perf_counter() - started
        stopped = "stopped_by_budget" in result.details
        if budget is not None and result.seconds > hard_limit(budget) and not stopped:
            result.details["over_budget_s"] = round(result.seconds - budget, 3)  # ran past its safety cap
        self.result = result
        return result

    def verdict(
        self, status: Status, summary: str, details: dict[str, Any] | None = None, action: str = ""
    ) -> CheckResult:
        """This check's :class:`CheckResult`: ``status``, one-sentence ``summary``, evidence, action."""
        return CheckResult(self.name, status, summary, {} if details is None else details, action=action)

    def resolved_budget(self, default: float | None = DEFAULT_TIME_BUDGET) -> float | None:
        """This check's budget in seconds: its ``time_budget``, or ``default`` when that is ``"default"``."""
        return default if self.time_budget == "default" else self.time_budget

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.result is not None or trainer.ckpt_path is not None:
            return  # checks describe a fresh run; a resumed run already passed them
        options = PreflightOptions(input_key=self.input_key, target_key=self.target_key)
        self.failed_on_any_rank = run_in_trainer(
            [self], trainer, pl_module, options, keep=self._keep, on_fail=self.on_fail
        )

    def _keep(self, report: PreflightReport) -> None:
        self.result = report.results[0]

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"result": None if self.result is None else self.result.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        result = state_dict.get("result")
        self.result = None if result is None else CheckResult.from_dict(result)
