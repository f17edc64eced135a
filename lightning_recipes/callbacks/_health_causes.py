"""HealthMonitor's attribution: for a problem the rules found, the candidate causes, the evidence the run
holds for and against each, and the one root cause the evidence names (or, when it does not separate them,
what would). Pure host functions over one check's :class:`CheckData` and the :class:`History`, after
the check's one sync.

Dead units have three usual causes, told apart by *when* they died: on the run's first batch, before any
update (the initialisation: the learning rate cannot have done it), right after a few batches whose loss
spiked far above the interval's median (outlier samples in the data), or while the updates were large at an
LR that had not killed them before (the learning rate). Non-finite weights are the step's that wrote them:
the first non-finite loss after the last check with finite weights names it.

Example:
    >>> history = History(dead_step0={"fc1": 0.8})
    >>> by_the_lr, found = dead_unit_causes({"fc1": 0.8}, CheckData(40, 0), history, DEFAULT_THRESHOLDS)
    >>> by_the_lr, found.cause, found.causes[0].evidence_for
    (False, 'initialisation', {'dead_at_step_0': {'fc1': 0.8}})
"""

from __future__ import annotations

import math
from typing import Any

from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    Cause,
    CheckData,
    Diagnosis,
    History,
    Spike,
    default_headline,
    headline,
)

__all__ = [
    "MAX_OUTLIER_BATCHES",
    "RISE",
    "dead_unit_causes",
    "dying_window",
    "plain_diagnosis",
    "ranked",
    "record_check",
    "spikes_between",
]

#: A rise of the dead fraction by this much between two checks is units dying (not measurement noise).
RISE = 0.1
#: At most this many spiking batches in the window where units died: "a few outlier batches".
MAX_OUTLIER_BATCHES = 5
_KEPT_SPIKES = 20


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def record_check(data: CheckData, history: History, ratio: float, lr: float, t: dict[str, float]) -> None:
    """Keep what attribution needs from this check: the dead fractions at step 0, the largest dead fraction
    with the step size, the loss spikes (``spike_z`` robust deviations and 2x the median), and whether the
    weights were finite."""
    if not history.dead_step0 and (data.dead_start or data.dead_rows_start):
        history.dead_step0 = {**data.dead_rows_start, **data.dead_start}
    measured = [*data.dead.values(), *data.dead_rows.values()]
    if measured:
        history.dead_seen.append([float(data.step), max(measured), ratio, lr])
    spikes = [s for s in data.loss_spikes if s.z >= t["spike_z"] and s.times >= 2.0]
    if data.loss_spike_count > MAX_OUTLIER_BATCHES:  # spikes everywhere: not a few outlier batches
        spikes = [Spike(s.step, s.epoch, s.batch, s.times, -1.0) for s in spikes]
    history.spikes = [*history.spikes, *([s.step, s.epoch, s.batch, s.times, s.z] for s in spikes)]
    history.spikes = history.spikes[-_KEPT_SPIKES:]
    if data.first_nonfinite_step is not None:
        known = history.streaks.get("first_nonfinite_loss_step", -1)
        if known < 0:
            history.streaks["first_nonfinite_loss_step"] = data.first_nonfinite_step
    if data.grad_sampled and not data.nonfinite_weights and math.isfinite(data.param_norm):
        history.finite_weights_step = data.step


def dying_window(history: History, t: dict[str, float]) -> tuple[int, int, int]:
    """``(from, to, first)``: the steps between which the units now dead began dying (the last check before
    the rise and its first check), and the index in ``history.dead_seen`` of that first check. The rise walks
    back from the first check of the current dead streak while each check added :data:`RISE` or more to the
    one before."""
    rows = history.dead_seen
    if not rows:
        return 0, 0, 0
    i = len(rows) - 1
    while i > 0 and rows[i - 1][1] >= t["dead_fraction"]:
        i -= 1
    j = i
    while j > 0 and rows[j - 1][1] - (rows[j - 2][1] if j >= 2 else 0.0) >= RISE:
        j -= 1
    start = int(rows[j - 1][0]) if j >= 1 else 0
    return start, int(rows[j][0]), j


def spikes_between(history: History, start: int, end: int) -> list[list[float]]:
    """The recorded loss spikes at steps in ``[start, end)``, after the first check (the loss's own early
    transient is no evidence)."""
    first = history.loss_steps[0] if history.loss_steps else 0
    return [s for s in history.spikes if max(start, first) <= s[0] < end]


def dead_unit_causes(
    dead: dict[str, float], data: CheckData, history: History, t: dict[str, float], lr_now: bool = False
) -> tuple[bool, Diagnosis]:
    """Why the layers of ``dead`` (fraction per layer) are dead: ``(by the LR, diagnosis)``.

    ``lr_now``: the update ratio is above ``ratio_high`` now or at a recent check (the old test, kept).
    """
    step0 = history.dead_step0
    at_step0 = {m: step0[m] for m in dead if step0.get(m, 0.0) >= t["dead_fraction"]}
    alive_at_step0 = {m: step0[m] for m in dead if m in step0 and step0[m] < t["dead_fraction"]}
    start, end, first = dying_window(history, t)
    rows = history.dead_seen
    around = rows[max(first - 1, 0) :]
    large = max((r[2] for r in around if math.isfinite(r[2])), default=math.nan)
    lr_for = lr_now or (math.isfinite(large) and large > t["ratio_high"])
    lr_at_death = max((r[3] for r in around if math.isfinite(r[3])), default=math.nan)
    survived = [
        r
        for r in rows[:first]
        if r[2] > t["ratio_high"] and math.isfinite(lr_at_death) and r[3] >= lr_at_death / 1.5
    ]
    spikes = sorted(spikes_between(history, start, end))
    spread = [s for s in spikes if s[4] < 0]  # an interval whose losses spiked on many batches
    spikes = [s for s in spikes if s[4] >= 0]
    few = 0 < len(spikes) <= MAX_OUTLIER_BATCHES and not spread
    worst = max(dead, key=lambda m: dead[m])

    init = Cause("initialisation")
    if at_step0:
        init.evidence_for["dead_at_step_0"] = at_step0
    if alive_at_step0:
        init.evidence_against["dead_at_step_0"] = alive_at_step0
    lr = Cause("learning_rate")
    if lr_for:
        lr.evidence_for["update_ratio_when_dying"] = large
    if at_step0:
        lr.evidence_against["dead_before_any_update"] = True
    if survived:
        lr.evidence_against["alive_at_same_lr_and_ratio"] = {
            "step": int(survived[-1][0]),
            "ratio": survived[-1][2],
        }
    data_cause = Cause("outlier_batches")
    if few:
        data_cause.evidence_for["spike_steps"] = [int(s[0]) for s in spikes]
        data_cause.evidence_for["spike_batches"] = [f"epoch {int(s[1])} batch {int(s[2])}" for s in spikes]
        data_cause.evidence_for["loss_x_median"] = max(s[3] for s in spikes)
        data_cause.evidence_for["died_between_steps"] = [start, end]
    elif spikes or spread:
        data_cause.evidence_against["spiking_batches"] = f"more than {MAX_OUTLIER_BATCHES} per interval"
    else:
        data_cause.evidence_against["loss_spikes_when_dying"] = 0

    fraction = dead[worst]
    if at_step0:
        cause: str | None = "initialisation"
        before = at_step0.get(worst, fraction)
        text = f"dead_units at step {data.step}: `{worst}` {fraction:.0%} dead, {before:.0%} at step 0"
        action = (
            f"Re-initialise `{worst}` (He/Kaiming, a zero or small positive bias) or use LeakyReLU/GELU: its "
            "units were dead at step 0, before any update, so the learning rate is not the cause."
        )
    elif few and (not lr_for or survived):
        cause = "outlier_batches"
        steps = ", ".join(str(int(s[0])) for s in spikes[:3])
        text = (
            f"dead_units at step {data.step}: `{worst}` {fraction:.0%} dead after batches at steps {steps} "
            f"(loss {max(s[3] for s in spikes):.0f}x median)"
        )
        action = (
            f"Find the samples of the batches at steps {steps} (loss {_fmt(max(s[3] for s in spikes))}x the "
            "median) and fix them (sentinel values such as -999, unscaled columns, corrupt rows): the units "
            "died right after them, at an LR that had not killed them before. Keep the LR."
        )
    elif lr_for:
        cause = "learning_rate"
        text = f"units died at update ratio {_fmt(large)}"
        action = ""
    else:
        cause = None
        text = f"dead_units at step {data.step}: `{worst}` {fraction:.0%} of units never fire"
        action = ""
    causes = ranked([init, data_cause, lr], cause)
    tell = (
        ""
        if cause is not None
        else "What tells them apart: the dead fraction on the first batch (dead at step 0: the "
        "initialisation), loss spikes on a few batches just before the units died (the data), or units dying "
        "at large update ratios at an LR that had not killed them before (the LR)."
    )
    return cause == "learning_rate", Diagnosis(headline(text), causes, cause, action, tell)


def ranked(causes: list[Cause], named: str | None) -> list[Cause]:
    """``causes`` most likely first: the named one, then those with evidence for them, then the open ones,
    then the excluded."""

    def order(cause: Cause) -> tuple[int, int]:
        if cause.name == named:
            return (0, 0)
        return (1 if cause.supported else 2 if not cause.excluded else 3, -len(cause.evidence_for))

    return sorted(causes, key=order)


def plain_diagnosis(problem: str, step: int, evidence: dict[str, Any], advice: str) -> Diagnosis:
    """A single-cause rule's finding as a record: the problem is its own cause, with the evidence for it."""
    return Diagnosis(
        default_headline(problem, step, evidence), [Cause(problem, dict(evidence))], problem, advice
    )
