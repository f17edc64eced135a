"""Check the learning-rate schedule over the planned run (the rules: :class:`ScheduleCheck`)."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor
from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR, PolynomialLR, ReduceLROnPlateau
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_positive
from lightning_recipes.checks.base import CheckOptions, SanityCheck, perturbed
from lightning_recipes.checks.report import SUMMARY_LIMIT, CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.optimizers import configure_optimizers_on_copy
from lightning_recipes.harness.run_length import PlannedTrainer, RunLength
from lightning_recipes.harness.schedulers import SchedulerConfig, schedulers_from_config
from lightning_recipes.harness.trial_fit import TrialFit, trial_fit

__all__ = ["ScheduleCheck"]


#: The most optimizer steps simulated (fixed work): a longer run is judged on this prefix, never passed.
MAX_SIMULATED = 200_000
#: The trial fit the schedule is observed in: ``OptimizationCheck``'s default, so the fit is shared.
TRIAL_STEPS, TRIAL_SAMPLES = 30, 64
_TRIAL = RunLength(TRIAL_STEPS, TRIAL_STEPS, 1, 1, TRIAL_STEPS, "the trial fit")
#: A copy's optimizer steps on one batch at most, and the relative change that is a direction (the guide).
PLATEAU_STEPS, PLATEAU_MOVE = 100, 0.2


@dataclass
class LRCurves:
    """``values[step, group]``: each group's LR per simulated step; bases, labels, a scheduler's error."""

    values: Tensor
    bases: list[float]
    labels: list[str]
    error: str = ""
    error_step: int | None = None


def lr_curves(
    configs: list[SchedulerConfig], total: int, batches_per_epoch: int | None, accumulate: int = 1
) -> LRCurves:
    """Each group's LR before each of ``total`` optimizer steps, stepped as Lightning does, to any error."""
    optimizers = list({id(c.optimizer): c.optimizer for c in configs if c.optimizer is not None}.values())
    indexed = [(i, g, group) for i, o in enumerate(optimizers) for g, group in enumerate(o.param_groups)]
    groups = [group for *_, group in indexed]
    labels = [f"optimizer {i} group {g}" for i, g, _ in indexed]
    bases = [float(group.get("initial_lr", group["lr"])) for group in groups]
    per_epoch = max(1, -(-batches_per_epoch // accumulate)) if batches_per_epoch else total
    step_configs = [c for c in configs if c.interval == "step"]
    rows: list[list[float]] = []
    repeats: list[int] = []
    error, error_step, step, epoch = "", None, 0, 0
    limit = min(total, MAX_SIMULATED)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*lr_scheduler\.step\(\)")  # no optimizer steps here
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.optim\.lr_scheduler")
        while step < limit and not error:
            in_epoch = min(per_epoch, limit - step)
            for k in range(in_epoch if step_configs else 1):  # no step scheduler: one row for the epoch
                rows.append([float(g["lr"]) for g in groups])
                repeats.append(1 if step_configs else in_epoch)
                step += 1 if step_configs else in_epoch
                batch_idx = min((k + 1) * accumulate, batches_per_epoch or (k + 1) * accumulate) - 1
                if step_configs and (error := _step_all(step_configs, batch_idx + 1)):
                    error_step = step
                    break
            if error or in_epoch < per_epoch:
                break
            error = _step_all([c for c in configs if c.interval == "epoch"], epoch + 1)
            error_step, epoch = step if error else None, epoch + 1
    values = torch.tensor(rows, dtype=torch.float64).repeat_interleave(torch.tensor(repeats), dim=0)
    return LRCurves(values, bases, labels, error, error_step)


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
    """A broken shape of one LR curve: which rule, and what was measured (a phrase with the numbers)."""

    rule: str
    message: str


def judge_curve(
    curve: Tensor, base: float, total: int, *, collapse: float, low: float, growth: float
) -> CurveFinding | None:
    """The first rule (see the guide) an LR ``curve`` breaks over a run of ``total`` steps; ``None``: sane."""
    n = len(curve)
    if n == 0 or base <= 0:
        return None
    low_steps = int((curve < low * base).sum())
    if float(curve[0]) < low * base and low_steps > total / 2:
        return CurveFinding("never_warms_up", f"stays below {low:g} x base for {low_steps} of {total} steps")
    warmed = torch.nonzero(curve >= low * base).flatten()  # a warm-up may start far below `collapse`
    warm_at = int(warmed[0]) if len(warmed) else n
    collapsed = torch.nonzero(curve[warm_at:] < collapse * base).flatten() + warm_at
    at = int(collapsed[0]) if len(collapsed) else total  # stays: at least half the rest below `low`
    if at < total / 2 and float((curve[at:] < low * base).double().mean()) >= 0.5:
        return CurveFinding("collapse", f"falls below {collapse:g} x base at step {at} of {total} and stays")
    tail = float(curve[min(n - 1, int(0.9 * total))])
    rising = n == total and n - 1 > int(0.9 * total) and float(curve[-1]) > tail * (1 + 1e-9)
    if float(curve[0]) < low * base and rising and float(curve.max()) < 0.5 * base:
        rises = f"still rises at step {total}, at {float(curve[-1]) / base:.2g} x base"
        return CurveFinding("never_warms_up", rises)
    positive = torch.nonzero(curve > 0).flatten()
    if n == total and len(positive):
        start, end = float(curve[int(positive[0])]), float(curve[-1])
        at_peak = end >= float(curve.max()) * (1 - 1e-9)  # a cyclic schedule rising again is below its peaks
        if end > growth * start and rising and at_peak:
            return CurveFinding("grows", f"grows to {end / start:.0f} x its first value and still grows")
    return None


_ASK_LENGTH = "To plan the LR curve, pass `max_epochs=` or `max_steps=` to preflight, or run it inside fit."
_FIXES = {
    "collapse": 'Register a decay sized in epochs with "interval": "epoch", or size it in optimizer steps.',
    "never_warms_up": 'Register a warm-up sized in steps with "interval": "step", or shorten it.',
    "grows": "Cap the warm-up factor at 1; size the schedule with trainer.estimated_stepping_batches.",
}


class ScheduleCheck(SanityCheck):
    """Step copies of the LR schedulers over the planned run and check each group's LR curve (the guide has
    the rules). Cost: one ``scheduler.step()`` per step of the run, at most :data:`MAX_SIMULATED`.

    Args:
        collapse: The LR is collapsed below this fraction of its base.
        low: A warm-up has not finished while the LR is below this fraction of its base.
        growth: The LR grows without bound when it ends above this multiple of its first value.

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> class PerEpochDecayPerStep(TinyClassifier):
        ...     def configure_optimizers(self):
        ...         optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        ...         decay = torch.optim.lr_scheduler.StepLR(optimizer, 3, gamma=0.1)  # meant per epoch
        ...         return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}
        >>> report = preflight(PerEpochDecayPerStep(), train_dataloaders=random_classification_loader(),
        ...                    checks=[ScheduleCheck()], max_epochs=10, progress=False)
        >>> report["schedule"].status, report["schedule"].details["findings"][0]["rule"]
        ('fail', 'collapse')
    """

    name = "schedule"

    def __init__(
        self,
        collapse: float = 1e-3,
        low: float = 1e-2,
        growth: float = 10.0,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        for name, value in (("collapse", collapse), ("low", low), ("growth", growth)):
            check_positive(name, value)
        if collapse > low:
            raise ValueError(f"`collapse` must be <= `low` ({low!r}), got {collapse!r}.")
        if growth <= 1:
            raise ValueError(f"`growth` must be a multiple > 1 of the first LR, got {growth!r}.")
        self.collapse, self.low, self.growth = collapse, low, growth

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        if not model.automatic_optimization:
            if unstepped := _never_stepped_by_hand(context):
                stayed = f"the LR stayed {unstepped['observed']:.3g} over {unstepped['steps']} trial steps"
                summary = f"manual optimisation: {stayed}, declared to reach {unstepped['declared_last']:.3g}"
                action = "Call self.lr_schedulers().step() in training_step (per step) or at each epoch end."
                return self.verdict("fail", summary, {"trial": unstepped}, action=action)
            raise CheckSkipped("manual optimisation: `training_step` steps its schedulers itself.")
        run = context.run_length
        stand_in = context.trainer_for_copies()
        config, error, stand_in_error = _configure(model, stand_in)
        if error and (stand_in is None or ("AttributeError" in error and "stand-in" in error)):
            if mismatch := _sized_in_steps_in_a_trial(context):
                return self.verdict("fail", mismatch.pop("summary"), mismatch, action=_PER_STEP)
            summary = f"`configure_optimizers` fails on a copy without a Trainer ({error.split(':')[0]})"
            return self.verdict("inconclusive", summary, {"error": error}, action=_ASK_LENGTH)
        if error:
            raise RuntimeError(f"`configure_optimizers` raised on a copy ({run.source}): {error}")
        configs = schedulers_from_config(config)
        if not configs and stand_in_error:
            raise CheckInconclusive(f"`configure_optimizers` failed with a stand-in ({stand_in_error[:50]})")
        if not configs:
            advice = "" if stand_in is not None else " (one built from `self.trainer` needs `max_epochs=`)"
            raise CheckSkipped(f"no scheduler configured{advice}.")
        stepped = [c for c in configs if not c.reduce_on_plateau]
        try:  # an add-on: a copy that cannot take steps here leaves the plateau unjudged, not the schedule
            plateau = plateau_directions(context, config) if len(stepped) < len(configs) else []
        except Exception as err:
            plateau = [{"agrees": None, "why": f"a copy's step raised {type(err).__name__}"}]
        if p := next((p for p in plateau if p["agrees"] is False), None):
            moved = f"{p['monitor']!r}: {p['before']:.3g} -> {p['after']:.3g} as a copy learned"
            summary = f"ReduceLROnPlateau(mode={p['mode']!r}) on {moved}, so it cuts the LR as it improves"
            action = f"Use mode={'min' if p['mode'] == 'max' else 'max'!r} for {p['monitor']!r}."
            return self.verdict("fail", summary[:SUMMARY_LIMIT], {"plateau": plateau}, action)
        if not stepped and (p := next((p for p in plateau if p["agrees"]), None)):
            moved = f"{p['monitor']!r} went {p['before']:.3g} -> {p['after']:.3g} as a copy learned"
            summary = f"ReduceLROnPlateau(mode={p['mode']!r}) agrees: {moved}"
            return self.verdict("pass", summary[:SUMMARY_LIMIT], {"plateau": plateau})
        if not stepped:
            why = "; ".join(str(p["why"]) for p in plateau if p.get("why"))[:60]
            why = f" ({why})" if why else ""
            raise CheckSkipped(f"only ReduceLROnPlateau is configured: its curve follows the metric{why}.")
        names = ", ".join(type(c.scheduler).__name__ for c in stepped)
        observed = _observed_in_a_trial(context)  # the schedule as the loop steps it, not as configured
        if "first_difference" in observed:
            step, seen, meant = observed["first_difference"]
            summary = f"a trial fit left the declared LR schedule at step {step}: {seen:.3g} vs {meant:.3g}"
            action = "Step each configured scheduler only where declared: Lightning steps it already."
            evidence = {"trial": observed, "schedulers": [_described(c) for c in stepped]}
            return self.verdict("fail", summary, evidence, action=action)
        mismatch = _sized_in_steps(context, run, "in the run") if run.total_steps else None
        if mismatch is None and run.total_steps is None:
            mismatch = _sized_in_steps_in_a_trial(context)
        if mismatch:
            return self.verdict("fail", mismatch.pop("summary"), mismatch, action=_PER_STEP)
        total, source = run.total_steps, run.source
        if total is None:
            total, source = _own_length(stepped, run.steps_per_epoch)
        early = _collapses_at_any_length(stepped, run, self.collapse, self.low) if total is None else None
        if early is not None:
            summary, action = f"{names}: the LR {early.pop('summary')}", early.pop("action")
            return self.verdict("warn", summary[:SUMMARY_LIMIT], {"schedulers": names, **early}, action)
        if total is None:
            summary = "the run's length is unknown and no scheduler states one"
            return self.verdict("inconclusive", summary, {"schedulers": names}, action=_ASK_LENGTH)
        curves = lr_curves(stepped, total, run.batches_per_epoch, run.accumulate_grad_batches)
        rules = {"collapse": self.collapse, "low": self.low, "growth": self.growth}
        findings = [
            (label, finding)
            for column, (label, base) in enumerate(zip(curves.labels, curves.bases, strict=True))
            if (finding := judge_curve(curves.values[:, column], base, total, **rules))
        ]
        if not curves.error and not findings:
            findings = _unfinished_rise(context, curves, run, total)
        details: dict[str, Any] = {
            "trial": observed,
            "plateau": plateau,
            "total_steps": total,
            "length_source": source,
            "schedulers": [_described(c) for c in stepped],
            "deterministic": True,
            "groups": {
                label: _summary(curves.values[:, i], base)
                for i, (label, base) in enumerate(zip(curves.labels, curves.bases))
            },
            "findings": [{"group": label, "rule": f.rule, "measured": f.message} for label, f in findings],
        }
        if curves.error:
            details.update(error_step=curves.error_step, error=curves.error)
            summary = f"{names} raises at optimizer step {curves.error_step} of the planned {total}"
            action = "Size it by self.trainer.estimated_stepping_batches, with interval 'step'."
            return self.verdict("fail", summary, details, action=action)
        if findings:
            finding = findings[0][1]
            summary = f"{names}: the LR {finding.message} ({finding.rule})"[:SUMMARY_LIMIT]
            return self.verdict("fail", summary, details, action=_FIXES[finding.rule])
        if len(curves.values) < total:
            raise CheckInconclusive(f"the {len(curves.values)} steps simulated of {total} broke no rule")
        first = details["groups"][curves.labels[0]]
        lr = f"LR {first['first']:.3g} -> {first['last']:.3g}, peak {first['peak']:.3g}"
        summary = f"{names} over {total} steps: {lr}: no collapse, endless warm-up or growth"
        return self.verdict("pass", summary, details)


def _unfinished_rise(
    context: CheckContext, curves: LRCurves, run: RunLength, total: int
) -> list[tuple[str, CurveFinding]]:
    """Groups whose LR ends at its peak and, stepped on, rises past twice it: a cut-off warm-up."""
    values = curves.values
    if len(values) < max(2, total) or not bool(
        ((values[-1] >= values.amax(0) * (1 - 1e-9)) & (values[-1] > values[0] * (1 + 1e-9))).any()
    ):
        return []
    config, error = configure_optimizers_on_copy(context.copy_model(), context.trainer_for_copies())
    fresh = [] if error else [c for c in schedulers_from_config(config) if not c.reduce_on_plateau]
    horizon = min(10 * total, total + 20_000)
    longer = lr_curves(fresh, horizon, run.batches_per_epoch, run.accumulate_grad_batches).values
    if longer.shape[1:] != values.shape[1:]:
        return []
    peaks, later = values.amax(0).tolist(), longer.amax(0).tolist()
    rule = "never_warms_up"  # stepped on past the run, the LR rises past twice its peak
    return [
        (label, CurveFinding(rule, f"still rises at step {total}, {b / a:.1f} x short of its peak"))
        for label, a, b in zip(curves.labels, peaks, later)
        if b > 2 * a > 0
    ]


_IDLE = 'A warm-up sized in steps needs "interval": "step" (stepped per epoch it starts at 0).'
_PER_STEP = 'Register a scheduler sized in optimizer steps with "interval": "step" (a dict), not per epoch.'
#: What each scheduler states as its own length (in its own steps).
_STATED_LENGTH = {OneCycleLR: "total_steps", CosineAnnealingLR: "T_max", PolynomialLR: "total_iters"}


def _stated_length(config: SchedulerConfig) -> tuple[str, int] | None:
    """``(attribute, value)`` of the length a scheduler states for itself, in its own steps."""
    kind = next((k for k in _STATED_LENGTH if isinstance(config.scheduler, k)), None)
    stated = getattr(config.scheduler, _STATED_LENGTH[kind], None) if kind else None
    return (_STATED_LENGTH[kind], stated) if kind and isinstance(stated, int) and stated >= 1 else None


def _built_for(context: CheckContext, run: RunLength) -> list[SchedulerConfig]:
    """The stepped schedulers ``configure_optimizers`` builds on a copy for ``run`` (``[]`` if it fails)."""
    config, error, _ = _configure(context.copy_model(), PlannedTrainer(run))
    return [] if error else [c for c in schedulers_from_config(config) if not c.reduce_on_plateau]


def _sized_in_steps(context: CheckContext, run: RunLength, where: str) -> dict[str, Any] | None:
    """A scheduler sized in optimizer steps but stepped per epoch (under half its curve), or ``None``."""
    per_epoch, total = run.steps_per_epoch, run.total_steps
    if not total or not per_epoch or per_epoch < 2 or not run.batches_per_epoch:
        return None
    longer = replace(
        run,
        total_steps=2 * total,
        batches_per_epoch=2 * run.batches_per_epoch,
        max_steps=2 * run.max_steps if run.max_steps else run.max_steps,
    )
    configs, doubled = _built_for(context, run), _built_for(context, longer)
    if len(configs) != len(doubled):
        return None
    for config, twin in zip(configs, doubled):
        stated, stated_twice = _stated_length(config), _stated_length(twin)
        if config.interval != "epoch" or stated is None or stated_twice is None:
            continue
        attribute, length = stated
        taken = total // per_epoch // config.frequency
        tracks_steps = abs(stated_twice[1] - 2 * length) <= 0.1 * length
        if abs(length - total) <= 0.1 * total and tracks_steps and taken < length / 2:
            name = type(config.scheduler).__name__
            return {
                "summary": f"{name}({attribute}={length}) is sized in optimizer steps ({total} {where}) but "
                f"stepped per epoch: {taken} of its {length} steps",
                "stated_length": length,
                "stated_length_for_twice_the_steps": stated_twice[1],
                "run_steps": total,
                "scheduler_steps_in_run": taken,
            }
    return None


def _sized_in_steps_in_a_trial(context: CheckContext) -> dict[str, Any] | None:
    """:func:`_sized_in_steps` for the trial fit's run, with the LR the trial used as evidence."""
    found = _sized_in_steps(context, _TRIAL, "in the trial fit")
    fit = _trial(context) if found is not None else ""  # a trial that cannot run: the configuration decides
    if found is not None and not isinstance(fit, str) and (lrs := [step.lr for step in fit.steps]):
        found["trial_lr"] = {"first": lrs[0], "lowest": min(lrs), "highest": max(lrs), "steps": len(lrs)}
    return found


def _trial(context: CheckContext) -> TrialFit | str:
    """The shared trial fit, or why it cannot run here (no data, a multi-process run)."""
    try:
        return trial_fit(context, steps=TRIAL_STEPS, max_samples=TRIAL_SAMPLES)
    except Exception as err:
        return f"{type(err).__name__}: {str(err)[:80]}"


def _trial_lrs(context: CheckContext, automatic: bool) -> tuple[list[float], list[float]] | str:
    """The trial fit's LR per step and the LR its schedulers declare for it; or why not."""
    if isinstance(fit := _trial(context), str):
        return fit
    if fit.automatic != automatic or len(fit.optimizers) != 1 or not fit.steps:
        return "not one optimizer stepping under automatic optimisation"
    if not (configs := _built_for(context, _TRIAL)):
        return "the trial's schedulers could not be rebuilt"
    declared = lr_curves(configs, len(fit.steps), TRIAL_STEPS).values.amax(dim=1).tolist()
    return [step.lr for step in fit.steps][: len(declared)], declared


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)


def _observed_in_a_trial(context: CheckContext) -> dict[str, Any]:
    """The trial's LRs against the declared ones: the first step where they differ, if any."""
    if isinstance(trial := _trial_lrs(context, automatic=True), str):
        return {"observed": False, "why": trial}
    seen, declared = trial
    pairs = enumerate(zip(seen, declared))
    off = [(i, a, b) for i, (a, b) in pairs if abs(a - b) > 1e-6 * max(abs(b), 1e-12)]
    return {"observed": True, "steps": len(seen), **({"first_difference": off[0]} if off else {})}


def _never_stepped_by_hand(context: CheckContext) -> dict[str, Any] | None:
    """Manual optimisation: the trial's LR never moved though the declared schedule moves it."""
    if isinstance(trial := _trial_lrs(context, automatic=False), str):
        return None
    seen, declared = trial
    first = declared[0]
    stuck = not all(_same(first, d) for d in declared) and all(_same(seen[0], lr) for lr in seen)
    if len(seen) < 2 or not _same(seen[0], first) or not stuck:
        return None
    return {"observed": seen[0], "steps": len(seen), "declared_first": first, "declared_last": declared[-1]}


def _monitors(config: Any, monitor: Any = None) -> list[tuple[ReduceLROnPlateau, str]]:
    """``(scheduler, monitor)`` of every ``ReduceLROnPlateau`` in a ``configure_optimizers`` return value."""
    if isinstance(config, ReduceLROnPlateau):
        return [(config, monitor)] if isinstance(monitor, str) else []
    if isinstance(config, Mapping):
        inner = config.get("scheduler", config.get("lr_scheduler"))
        return _monitors(inner, config.get("monitor", monitor))
    if isinstance(config, (list, tuple)):
        return [found for item in config for found in _monitors(item, monitor)]
    return []


def plateau_directions(context: CheckContext, config: Any) -> list[dict[str, Any]]:
    """Per ``ReduceLROnPlateau``: its monitor before and after a copy learns, and whether it ``agrees``."""
    if not (monitors := _monitors(config)):
        return []
    model = context.copy_model()
    optimizers = context.build_optimizers(model).optimizers
    batch = context.train_batches(1)[0]
    logged: dict[str, float] = {}

    def log(name: str, value: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(value, (int, float)) or (isinstance(value, Tensor) and value.numel() == 1):
            logged[name] = float(value)
            if kwargs.get("on_epoch"):  # with on_step too, Lightning logs name_step and name_epoch
                logged[f"{name}_step"] = logged[f"{name}_epoch"] = float(value)

    def log_dict(values: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        for name, value in values.items():
            log(name, value, *args, **kwargs)

    model.log, model.log_dict = log, log_dict  # type: ignore[method-assign,assignment]

    def read() -> tuple[float, dict[str, float]]:
        logged.clear()
        model.eval()  # deterministic reads
        with torch.no_grad():
            loss = float(context.training_loss(model, batch))
            if any(m not in logged for _, m in monitors):
                with perturbed("the training batch in validation_step"):
                    model.validation_step(batch, 0)
        model.train()
        return loss, dict(logged)

    loss_before, before = read()
    for _ in range(PLATEAU_STEPS):
        step_loss = float(context.optimization_step(model, optimizers, batch))  # sync: once per step
        if step_loss < (1 - PLATEAU_MOVE) * loss_before:
            break
    loss_after, after = read()
    learned = loss_after < (1 - PLATEAU_MOVE) * loss_before
    found = []
    for scheduler, monitor in monitors:
        a, b = before.get(monitor), after.get(monitor)
        entry: dict[str, Any] = {"monitor": monitor, "mode": scheduler.mode, "before": a, "after": b}
        if a is None or b is None:
            entry.update(agrees=None, why=f"{monitor!r} is not logged on a copy's step")
        elif not learned:
            why = f"a copy's loss did not fall {PLATEAU_MOVE:.0%} in {PLATEAU_STEPS} steps"
            entry.update(agrees=None, why=why)
        elif abs(b - a) < PLATEAU_MOVE * max(abs(a), 1e-12):
            entry.update(agrees=None, why=f"{monitor!r} moved under {PLATEAU_MOVE:.0%} as a copy learned")
        else:
            entry["agrees"] = scheduler.mode == ("min" if b < a else "max")
        found.append(entry)
    return found


def _configure(model: Any, stand_in: Any) -> tuple[Any, str, str]:
    """``configure_optimizers`` on the copy (with the stand-in first): config, error, stand-in error."""
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


def _summary(curve: Tensor, base: float) -> dict[str, Any]:
    ends = {"first": float(curve[0]), "peak": float(curve.max()), "last": float(curve[-1])}
    return {"base": base, **ends, "curve": [float(v) for v in curve[:: max(1, len(curve) // 50)]]}


def _described(config: SchedulerConfig) -> str:
    return f"{type(config.scheduler).__name__} (per {config.interval}, every {config.frequency})"


def _collapses_at_any_length(
    configs: list[SchedulerConfig], run: RunLength, collapse: float, low: float
) -> dict[str, Any] | None:
    """Run length unknown: an LR at 0 all of epoch 0, or a collapse that holds for any length (the guide)."""
    if not (per_epoch := run.steps_per_epoch):
        return None
    horizon = max(3 * per_epoch, min(20 * per_epoch, 20_000))
    curves = lr_curves(configs, horizon, run.batches_per_epoch, run.accumulate_grad_batches)
    if curves.error or len(curves.values) < horizon:
        return None
    rules = {"collapse": collapse, "low": low, "growth": math.inf}
    for column, (label, base) in enumerate(zip(curves.labels, curves.bases, strict=True)):
        curve = curves.values[:, column]
        if base > 0 and float(curve[:per_epoch].abs().max()) == 0.0:
            summary = f"of {label} is 0 through all of epoch 0 ({per_epoch} steps)"
            idle = {"rule": "idle_first_epoch", "group": label, "steps": per_epoch}
            return {**idle, "summary": summary, "action": _IDLE}
        below = torch.nonzero(curve < collapse * base).flatten()
        epoch = int(below[0]) // per_epoch if len(below) else 2
        found = [judge_curve(curve[:n], base, n, **rules) for n in ((epoch + 2) * per_epoch, horizon)]
        if all(f is not None and f.rule == "collapse" for f in found) and epoch < 2:
            measured = f"falls below {collapse:g} x base at step {int(below[0])} (epoch {epoch})"
            return {
                "group": label,
                "measured": measured,
                "summary": f"{measured}, stays there in runs of {epoch + 2} to {horizon // per_epoch} epochs",
                "action": f"{_FIXES['collapse']} {_ASK_LENGTH}",
                "collapse_step": int(below[0]),
                "steps_per_epoch": per_epoch,
                "horizon_epochs": horizon // per_epoch,
            }
    return None


def _own_length(configs: list[SchedulerConfig], steps_per_epoch: int | None) -> tuple[int | None, str]:
    """The run length a scheduler states itself, in optimizer steps, when the run's is unknown."""
    for config in configs:
        own = _stated_length(config)
        per_interval = 1 if config.interval == "step" else steps_per_epoch
        if own is not None and per_interval is not None:
            attribute, stated = own
            source = f"{type(config.scheduler).__name__}'s own {attribute}={stated} (run length unknown)"
            return stated * config.frequency * per_interval, source
    return None, "unknown"
