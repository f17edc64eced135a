"""Check the learning-rate schedule over the planned run: no early collapse, a warm-up that ends, no
unbounded growth.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR, PolynomialLR
from typing_extensions import override

from lightning_recipes._validation import check_positive
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key
from lightning_recipes.harness.optimizers import configure_optimizers_on_copy
from lightning_recipes.harness.run_length import RunLength
from lightning_recipes.harness.schedulers import SchedulerConfig, schedulers_from_config

__all__ = ["ScheduleCheck"]


#: Steps between two looks at the time budget.
_BUDGET_EVERY = 256


@dataclass
class LRCurves:
    """The LR of each optimizer param group at each optimizer step (``values[step, group]``), each group's
    base LR (its ``initial_lr``), how many steps were simulated of the planned ``total``, and the error a
    scheduler raised (at which step), if any."""

    values: Tensor
    bases: list[float]
    labels: list[str]
    total: int
    error: str = ""
    error_step: int | None = None
    stopped_by_budget: bool = False
    simulated: int = field(default=0)


def lr_curves(
    configs: list[SchedulerConfig], total: int, batches_per_epoch: int | None, accumulate: int = 1
) -> LRCurves:
    """Step ``configs`` (copies: they are stepped for real) over ``total`` optimizer steps as Lightning's
    fit loop does, and record every group's LR before each optimizer step.

    A ``"step"`` scheduler steps after an optimizer step when ``(batch_idx + 1) % frequency == 0``
    (``batch_idx`` counts batches within the epoch, ``accumulate`` per optimizer step); an ``"epoch"`` one
    after each full epoch when ``(epoch + 1) % frequency == 0``. With no known epoch length the run is one
    long epoch. Torch's "``lr_scheduler.step()`` before ``optimizer.step()``" warning is silenced (no
    optimizer steps here). A scheduler that raises (``OneCycleLR`` stepped past its ``total_steps``) ends
    the curve there, with the error. The loop looks at the time budget every 256 steps.

    Example:
        >>> import torch
        >>> from lightning_recipes.harness.schedulers import SchedulerConfig
        >>> optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=1.0)
        >>> step = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        >>> curves = lr_curves([SchedulerConfig(step, "epoch")], total=6, batches_per_epoch=1)
        >>> curves.values[:, 0].tolist()
        [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """
    optimizers: list[Optimizer] = []
    for config in configs:
        optimizer = config.optimizer
        if optimizer is not None and all(optimizer is not o for o in optimizers):
            optimizers.append(optimizer)
    groups = [group for optimizer in optimizers for group in optimizer.param_groups]
    labels = [
        f"optimizer {i} ({type(o).__name__}) group {g}"
        for i, o in enumerate(optimizers)
        for g in range(len(o.param_groups))
    ]
    bases = [float(group.get("initial_lr", group["lr"])) for group in groups]
    per_epoch = max(1, -(-batches_per_epoch // accumulate)) if batches_per_epoch else total
    step_configs = [c for c in configs if c.interval == "step"]
    epoch_configs = [c for c in configs if c.interval == "epoch"]
    rows: list[list[float]] = []
    repeats: list[int] = []
    error, error_step, stopped = "", None, False
    step = epoch = 0
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*lr_scheduler\.step\(\)")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.optim\.lr_scheduler")
        while step < total and not error and not stopped:
            in_epoch = min(per_epoch, total - step)
            if not step_configs:  # constant within the epoch: one row, repeated
                rows.append([float(g["lr"]) for g in groups])
                repeats.append(in_epoch)
                step += in_epoch
            else:
                for k in range(in_epoch):
                    rows.append([float(g["lr"]) for g in groups])
                    repeats.append(1)
                    step += 1
                    batch_idx = min((k + 1) * accumulate, batches_per_epoch or (k + 1) * accumulate) - 1
                    error = _step_all(step_configs, batch_idx + 1)
                    if error:
                        error_step = step
                        break
                    if step % _BUDGET_EVERY == 0 and out_of_time():
                        stopped = True
                        break
            if error or stopped or in_epoch < per_epoch:
                break
            error = _step_all(epoch_configs, epoch + 1)
            if error:
                error_step = step
            epoch += 1
            if epoch % _BUDGET_EVERY == 0 and out_of_time():
                stopped = True
    values = torch.tensor(rows, dtype=torch.float64).repeat_interleave(torch.tensor(repeats), dim=0)
    return LRCurves(values, bases, labels, total, error, error_step, stopped, len(values))


def _step_all(configs: list[SchedulerConfig], index: int) -> str:
    for config in configs:
        if index % config.frequency == 0:
            try:
                config.scheduler.step()
            except Exception as err:  # OneCycleLR past total_steps raises ValueError; Lightning would too
                return f"{type(config.scheduler).__name__}.step() raised {type(err).__name__}: {err}"
    return ""


@dataclass(frozen=True)
class CurveFinding:
    """A broken shape of one LR curve: which rule, and the message with the numbers."""

    rule: str
    message: str


def judge_curve(
    curve: Tensor, base: float, total: int, *, collapse: float, low: float, growth: float
) -> CurveFinding | None:
    """The first broken rule of one group's LR ``curve`` over a planned run of ``total`` steps (``None``:
    sane). ``curve`` may be shorter than ``total`` (a run simulated in part): only what it shows is judged.

    Rules: the LR starts below ``low x base`` and stays there for more than half the run, or is still
    rising at the end below half its base (a warm-up that never finishes); it falls below ``collapse x
    base`` before half the run, after having reached ``low x base``, and stays below ``low x base`` for at
    least half of the rest (a decay meant per epoch registered per step; a warm-up that starts lower, or
    warm restarts that dip and come back, are not a collapse); it ends above ``growth x`` its first positive
    value, at its highest, and is still growing over the last tenth of the run (``gamma > 1``, a warm-up
    with no end).

    Example:
        >>> import torch
        >>> decayed = 0.5 ** torch.arange(100.0)  # halves every step
        >>> judge_curve(decayed, 1.0, 100, collapse=1e-3, low=1e-2, growth=10).rule
        'collapse'
        >>> judge_curve(torch.ones(100), 1.0, 100, collapse=1e-3, low=1e-2, growth=10) is None
        True
        >>> warm_then_flat = torch.linspace(1e-4, 1.0, 100).clamp(max=0.5) * 2  # from 2e-4 x base
        >>> judge_curve(warm_then_flat, 1.0, 100, collapse=1e-3, low=1e-2, growth=1000) is None
        True
    """
    n = len(curve)
    if n == 0 or base <= 0:
        return None
    low_steps = int((curve < low * base).sum())
    if float(curve[0]) < low * base and low_steps > total / 2:
        first_ok = torch.nonzero(curve >= low * base).flatten()
        reached = f"first reaches it at step {int(first_ok[0])}" if len(first_ok) else "never reaches it"
        return CurveFinding(
            "never_warms_up",
            f"stays below {low:g} x its base LR ({base:.3g}) for {low_steps} of {total} steps "
            f"({low_steps / total:.0%} of the run; starts at {float(curve[0]):.3g}, peaks at "
            f"{float(curve.max()):.3g}, {reached})",
        )
    warmed = torch.nonzero(curve >= low * base).flatten()  # a warm-up may start far below `collapse`
    warm_at = int(warmed[0]) if len(warmed) else n
    collapsed = torch.nonzero(curve[warm_at:] < collapse * base).flatten() + warm_at
    if len(collapsed) and int(collapsed[0]) < total / 2:
        at = int(collapsed[0])
        stays = float((curve[at:] < low * base).double().mean())  # warm restarts come back up: no collapse
        if stays >= 0.5:
            return CurveFinding(
                "collapse",
                f"falls below {collapse:g} x its base LR ({base:.3g}) at step {at} of {total} "
                f"({at / total:.0%} of the run: {float(curve[at]):.3g}) and stays below {low:g} x base for "
                f"{stays:.0%} of the rest: the rest of the run trains with almost no step",
            )
    positive = torch.nonzero(curve > 0).flatten()
    tail = float(curve[min(n - 1, int(0.9 * total))])
    rising = n == total and n - 1 > int(0.9 * total) and float(curve[-1]) > tail * (1 + 1e-9)
    if float(curve[0]) < low * base and rising and float(curve.max()) < 0.5 * base:
        return CurveFinding(
            "never_warms_up",
            f"starts at {float(curve[0]):.3g} ({float(curve[0]) / base:.2g} x its base LR {base:.3g}) and is "
            f"still rising at the end of the run, at {float(curve[-1]):.3g} ({float(curve[-1]) / base:.2g} x "
            "base): the warm-up does not finish within the run",
        )
    if n == total and len(positive):
        start = float(curve[int(positive[0])])
        end = float(curve[-1])
        at_peak = end >= float(curve.max()) * (1 - 1e-9)  # a cyclic schedule rising again is below its peaks
        if end > growth * start and rising and at_peak:
            return CurveFinding(
                "grows",
                f"grows to {end:.3g} ({end / start:.0f} x its first value {start:.3g}) and is still "
                f"growing at the end of the run ({tail:.3g} at 90% of it)",
            )
    return None


_ASK_LENGTH = (
    "pass `max_epochs=` or `max_steps=` to `preflight(...)` (inside `trainer.fit` the Trainer's "
    "`estimated_stepping_batches` is used)"
)


class ScheduleCheck(SanityCheck):
    """Step copies of the configured LR schedulers over the planned run, as Lightning would, and check the
    LR curve of every optimizer param group.

    The run's length comes from the Trainer, from ``max_epochs=``/``max_steps=``, or from the scheduler
    itself (else ``inconclusive``). Fails, relative to the base LR, on a warm-up that never finishes, a
    collapse below ``collapse`` x base before half the run, growth beyond ``growth`` x, or a scheduler that
    raises before the run ends. Skips without a scheduler, with only ``ReduceLROnPlateau``, or under manual
    optimisation. The curve is deterministic: no noise.

    Cost: one ``configure_optimizers`` and one ``scheduler.step()`` per step of the run (~0.3 s for 10k).

    Args:
        collapse: The LR is collapsed below this fraction of its base.
        low: A warm-up has not finished while the LR is below this fraction of its base.
        growth: The LR grows without bound when it ends above this multiple of its first value.

    Raises:
        ValueError: If ``collapse``, ``low`` or ``growth`` is not positive, ``collapse > low`` or
            ``growth <= 1``.

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> class PerEpochDecayPerStep(TinyClassifier):
        ...     def configure_optimizers(self):
        ...         optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        ...         decay = torch.optim.lr_scheduler.StepLR(optimizer, 3, gamma=0.1)  # meant per epoch
        ...         return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}
        >>> loader = random_classification_loader()
        >>> report = preflight(PerEpochDecayPerStep(), train_dataloaders=loader, checks=[ScheduleCheck()],
        ...                    max_epochs=10, progress=False)
        >>> report["schedule"].status, report["schedule"].details["findings"][0]["rule"]
        ('fail', 'collapse')
        >>> report = preflight(TinyClassifier(), train_dataloaders=loader, checks=[ScheduleCheck()],
        ...                    max_epochs=10, progress=False)
        >>> report["schedule"].status, report["schedule"].message
        ('skip', 'skipped: no scheduler configured: the LR stays at what the optimizer was given.')
    """

    name = "schedule"

    def __init__(
        self,
        collapse: float = 1e-3,
        low: float = 1e-2,
        growth: float = 10.0,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_positive("collapse", collapse)
        check_positive("low", low)
        check_positive("growth", growth)
        if collapse > low:
            raise ValueError(f"`collapse` must be <= `low` ({low!r}), got {collapse!r}.")
        if growth <= 1:
            raise ValueError(f"`growth` must be a multiple > 1 of the first LR, got {growth!r}.")
        self.collapse = collapse
        self.low = low
        self.growth = growth

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        if not model.automatic_optimization:
            raise CheckSkipped(
                "manual optimisation: `training_step` steps its schedulers itself (`self.lr_schedulers()`), "
                "so when they step cannot be known without running it."
            )
        run = context.run_length
        stand_in = context.trainer_for_copies()
        config, error, stand_in_error = _configure(model, stand_in)
        if error:
            return self._not_configured(error, run, stand_in is not None)
        configs = schedulers_from_config(config)
        if not configs and stand_in is None:
            raise CheckSkipped(
                "no scheduler configured (in what `configure_optimizers` returns outside a Trainer): the LR "
                "stays at what the optimizer was given. If yours builds its schedule from `self.trainer` (as "
                f"OptimizerRecipeMixin does), {_ASK_LENGTH}."
            )
        if not configs and stand_in_error:
            return CheckResult(
                self.name,
                "inconclusive",
                "no scheduler in what `configure_optimizers` returns outside a Trainer, and with a stand-in "
                f"for the planned run ({run.source}) it raised ({stand_in_error}): a module that builds its "
                "schedule from `self.trainer` cannot be planned here. Run the check inside fit: "
                "`Trainer(callbacks=[Preflight()])`.",
                {"error": stand_in_error},
            )
        if not configs:
            raise CheckSkipped("no scheduler configured: the LR stays at what the optimizer was given.")
        stepped = [c for c in configs if not c.reduce_on_plateau]
        if not stepped:
            raise CheckSkipped(
                "only ReduceLROnPlateau is configured: it lowers the LR when the monitored metric stops "
                "improving, so its curve depends on training and cannot be planned."
            )
        total, source = run.total_steps, run.source
        if total is None:
            total, source = _own_length(stepped, run.steps_per_epoch)
        if total is None:
            return CheckResult(
                self.name,
                "inconclusive",
                "the run's length is unknown, and no scheduler states one, so the LR curve cannot be "
                f"planned: {_ASK_LENGTH}.",
                {"schedulers": _names(stepped)},
            )
        curves = lr_curves(stepped, total, run.batches_per_epoch, run.accumulate_grad_batches)
        extra: list[tuple[str, CurveFinding]] = []
        if not curves.error and not curves.stopped_by_budget and _rising_at_end(curves):
            extra = self._unfinished_rise(context, curves, run)
        return self._verdict(curves, stepped, source, len(configs) - len(stepped), extra)

    def _unfinished_rise(
        self, context: CheckContext, curves: LRCurves, run: RunLength
    ) -> list[tuple[str, CurveFinding]]:
        """Groups whose LR is still rising when the run ends and, stepped on past the run (fresh copies, up
        to 10x the run or 20k more steps), would rise to more than twice the run's peak: the run ends
        inside the schedule's warm-up (a warm-up registered per epoch, a schedule sized for a longer run)."""
        total = curves.total
        config, error = configure_optimizers_on_copy(context.copy_model(), context.trainer_for_copies())
        if error:
            return []
        fresh = [c for c in schedulers_from_config(config) if not c.reduce_on_plateau]
        longer = lr_curves(
            fresh, min(10 * total, total + 20_000), run.batches_per_epoch, run.accumulate_grad_batches
        )
        if longer.values.shape[1] != curves.values.shape[1]:
            return []
        found = []
        for column, label in enumerate(curves.labels):
            peak_run = float(curves.values[:, column].max())
            peak_later = float(longer.values[:, column].max())
            if peak_later > 2 * peak_run > 0:
                at = int(longer.values[:, column].argmax())
                found.append(
                    (
                        label,
                        CurveFinding(
                            "never_warms_up",
                            f"is still rising when the run ends: it peaks at {peak_run:.3g} within the "
                            f"{total} planned steps, while the schedule, stepped on, keeps rising to "
                            f"{peak_later:.3g} ({peak_later / peak_run:.1f} x, at step {at}): the run ends "
                            "inside the warm-up, so the peak LR it was configured with is never used",
                        ),
                    )
                )
        return found

    def _not_configured(self, error: str, run: RunLength, had_stand_in: bool) -> CheckResult:
        if not had_stand_in:
            return CheckResult(
                self.name,
                "inconclusive",
                f"`configure_optimizers` fails on a copy without a Trainer ({error}); it likely reads "
                "`self.trainer` (estimated_stepping_batches, max_epochs). To plan the LR curve, "
                f"{_ASK_LENGTH}.",
                {"error": error},
            )
        if "AttributeError" in error and "stand-in" in error:
            return CheckResult(
                self.name,
                "inconclusive",
                "`configure_optimizers` reads more of `self.trainer` than a preflight outside `fit` can "
                f"answer ({error}); run the check inside fit: "
                "`Trainer(callbacks=[Preflight(checks=[...])])`.",
                {"error": error},
            )
        raise RuntimeError(
            f"`configure_optimizers` raised on a copy for the planned run ({run.source}): {error}"
        )

    def _verdict(
        self,
        curves: LRCurves,
        configs: list[SchedulerConfig],
        source: str,
        plateau: int,
        extra: list[tuple[str, CurveFinding]] | None = None,
    ) -> CheckResult:
        total = curves.total
        findings: list[tuple[str, CurveFinding]] = []
        for column, (label, base) in enumerate(zip(curves.labels, curves.bases, strict=True)):
            finding = judge_curve(
                curves.values[:, column],
                base,
                total,
                collapse=self.collapse,
                low=self.low,
                growth=self.growth,
            )
            if finding is not None:
                findings.append((label, finding))
        findings += [(label, f) for label, f in extra or [] if label not in {g for g, _ in findings}]
        details: dict[str, Any] = {
            "total_steps": total,
            "simulated_steps": curves.simulated,
            "length_source": source,
            "schedulers": _names(configs),
            "deterministic": True,
            "groups": {
                label: _summary(curves, column, base)
                for column, (label, base) in enumerate(zip(curves.labels, curves.bases, strict=True))
            },
            "findings": [{"group": label, "rule": f.rule} for label, f in findings],
        }
        names = ", ".join(_names(configs))
        plan = f"over the planned {total} optimizer steps ({source})"
        note = f" ({plateau} ReduceLROnPlateau not simulated: it follows the metric.)" if plateau else ""
        if curves.error:
            details["error_step"] = curves.error_step
            return CheckResult(
                self.name,
                "fail",
                f"stepping {names} {plan}: {curves.error} at optimizer step {curves.error_step}: training "
                "would stop there. Likely cause: the scheduler's length (total_steps, epochs x "
                "steps_per_epoch) is shorter than the run. Try: "
                '`total_steps=self.trainer.estimated_stepping_batches` with `"interval": "step"`.' + note,
                details,
            )
        if findings:
            fix = {
                "collapse": 'a decay meant per epoch registered per step (`"interval": "step"` with '
                "StepLR/ExponentialLR sized in epochs), or step_size/gamma/T_max sized in epochs. Try: "
                '`"interval": "epoch"`, or size the decay in optimizer steps',
                "never_warms_up": "a warm-up sized in steps but registered per epoch (the default interval), "
                'or a warm-up longer than the run. Try: `"interval": "step"` in the lr_scheduler dict, or a '
                "shorter warm-up",
                "grows": "gamma > 1, a warm-up factor with no cap (min(1, step / warmup)), or a schedule "
                "longer than the run (OneCycleLR whose total_steps exceeds it). Try: cap the warm-up at 1; "
                "size the schedule with `self.trainer.estimated_stepping_batches`",
            }
            parts = [
                f"the LR of {label} {f.message}. Likely cause: {fix[f.rule]}." for label, f in findings[:3]
            ]
            return CheckResult(
                self.name, "fail", f"stepping {names} {plan}: " + " | ".join(parts) + note, details
            )
        if curves.stopped_by_budget:
            details["stopped_by_budget"] = True
            return CheckResult(
                self.name,
                "inconclusive",
                f"stepping {names} {plan}: the time budget ended the simulation after {curves.simulated} "
                "steps, with no broken rule so far. Try: a larger `time_budget` for this check.",
                details,
            )
        summary = _summary(curves, 0, curves.bases[0])
        return CheckResult(
            self.name,
            "pass",
            f"stepping {names} {plan}: the LR of {curves.labels[0]} goes from {summary['first']:.3g} to "
            f"{summary['last']:.3g} (peak {summary['peak']:.3g}, base {curves.bases[0]:.3g}): no early "
            "collapse, no unfinished warm-up, no unbounded growth. The curve is deterministic (no noise "
            "estimate needed); the planned length is as stated." + note,
            details,
        )


def _configure(model: Any, stand_in: Any) -> tuple[Any, str, str]:
    """``configure_optimizers`` on the copy: with the planned run's stand-in Trainer attached first when there
    is one (a module that builds its schedule only when a Trainer is attached, as ``OptimizerRecipeMixin``
    does, returns it then), else as :func:`configure_optimizers_on_copy` calls it. Returns the config, why it
    failed (``""``), and why the call with the stand-in failed (``""``: it did not, or there was none)."""
    stand_in_error = ""
    if stand_in is not None:
        model.trainer = stand_in
        announcer = logging.getLogger("lightning.pytorch.utilities.rank_zero")  # a recipe's summary line
        level = announcer.level
        announcer.setLevel(max(level, logging.WARNING))  # is about the copy: not the user's run
        try:
            config, stand_in_error = configure_optimizers_on_copy(model)
        finally:
            model.trainer = None
            announcer.setLevel(level)
        if not stand_in_error:
            return config, "", ""
    config, error = configure_optimizers_on_copy(model, stand_in)
    return config, error, stand_in_error


def _rising_at_end(curves: LRCurves) -> bool:
    """Whether some group's LR ends the run at its highest, above where it started (a warm-up or a rise that
    may not have finished: the only shape worth stepping on past the run)."""
    values = curves.values
    if len(values) < 2 or len(values) < curves.total:
        return False
    at_peak = values[-1] >= values.max(dim=0).values * (1 - 1e-9)
    return bool((at_peak & (values[-1] > values[0] * (1 + 1e-9))).any())


def _summary(curves: LRCurves, column: int, base: float) -> dict[str, Any]:
    curve = curves.values[:, column]
    step = max(1, len(curve) // 50)
    return {
        "base": base,
        "first": float(curve[0]),
        "peak": float(curve.max()),
        "lowest": float(curve.min()),
        "last": float(curve[-1]),
        "curve_every": step,
        "curve": [float(v) for v in curve[::step]],
    }


def _names(configs: list[SchedulerConfig]) -> list[str]:
    return [f"{type(c.scheduler).__name__} (per {c.interval}, every {c.frequency})" for c in configs]


def _own_length(configs: list[SchedulerConfig], steps_per_epoch: int | None) -> tuple[int | None, str]:
    """The run length a scheduler states itself, in optimizer steps, when the run's is unknown."""
    for config in configs:
        scheduler = config.scheduler
        stated: tuple[str, Any] | None = None
        if isinstance(scheduler, OneCycleLR):
            stated = ("total_steps", scheduler.total_steps)
        elif isinstance(scheduler, CosineAnnealingLR):
            stated = ("T_max", scheduler.T_max)
        elif isinstance(scheduler, PolynomialLR):
            stated = ("total_iters", scheduler.total_iters)
        if stated is None or not isinstance(stated[1], int) or stated[1] < 1:
            continue
        per_interval = 1 if config.interval == "step" else steps_per_epoch
        if per_interval is None:
            continue
        total = stated[1] * config.frequency * per_interval
        return total, (
            f"{type(scheduler).__name__}'s own {stated[0]}={stated[1]}, as the run's length is unknown: "
            + _ASK_LENGTH.replace("pass", "to check it against the run, pass", 1)
        )
    return None, "unknown"
