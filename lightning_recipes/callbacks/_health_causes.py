"""HealthMonitor's attribution: a finding's candidate causes, the evidence for and against each,
and the root cause when the evidence names one (``docs/guides/health_monitor.md``, "Attribution").

Example:
    >>> history = History(dead_step0={"fc1": 0.8})
    >>> by_the_lr, found = dead_unit_causes({"fc1": 0.8}, CheckData(40, 0), history, DEFAULT_THRESHOLDS)
    >>> by_the_lr, found.cause, found.causes[0].evidence_for
    (False, 'initialisation', {'dead_at_step_0': {'fc1': 0.8}})
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from lightning_recipes._stats import ROBUST_SIGMA
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    Cause,
    CheckData,
    Diagnosis,
    History,
    default_headline,
    fmt,
    headline,
)

__all__ = [
    "BASELINE_STEPS",
    "MAX_OUTLIER_BATCHES",
    "RISE",
    "GradientSpikes",
    "dead_unit_causes",
    "dying_window",
    "gradient_spikes",
    "outliers_since",
    "plain_diagnosis",
    "ranked",
    "record_check",
    "weighed",
]

#: A rise of the dead fraction by this much between two checks is units dying (not measurement noise).
RISE = 0.1
#: At most this many outlier batches in an interval (and a quarter of its steps): "a few outlier batches".
MAX_OUTLIER_BATCHES = 5
ALL_DEAD = 0.99  #: a layer this share dead explains one prediction for every sample by itself
#: A step's gradient norm is judged against the median of this many calm steps before it (3 at least).
BASELINE_STEPS = 8
_MIN_BASELINE = 3
#: A gain over the batch-mean prediction within this share of the loss: the same output for every sample.
SAME_OUTPUT = 1e-5
#: Smaller outliers: a value this many times the typical batch's largest, its gradient as many times calm.
HEAVY = 4.0
_KEPT_SPIKES = 20


@dataclass
class GradientSpikes:
    """One interval's gradient-norm spikes: ``outliers`` (a few spikes on extreme batches),
    ``exploded`` (steps on ordinary batches ``explode_factor`` x their baseline) and their ``triggers``.
    """

    outliers: list[list[float]] = field(default_factory=list)
    exploded: list[list[float]] = field(default_factory=list)
    triggers: list[list[float]] = field(default_factory=list)
    steps: int = 0
    typical_input: float = math.nan
    typical_norm: float = math.nan


def _epochs(records: list[tuple[int, float, int, int, int, float]], epoch: int) -> list[int]:
    """Each record's epoch: the check's for the last, one less before each reset of the batch index."""
    out = [epoch] * len(records)
    for i in range(len(records) - 2, -1, -1):
        out[i] = out[i + 1] - (1 if records[i][2] > records[i + 1][2] else 0)
    return out


def gradient_spikes(
    data: CheckData, history: History, t: dict[str, float], jump: float = 1.0
) -> GradientSpikes:
    """Each step's gradient norm against the median of the last :data:`BASELINE_STEPS` calm
    steps: the interval's outlier batches and exploded steps, recorded in ``history.spikes``.

    Example:
        >>> records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 3.0) for k in range(20)]
        >>> records[7] = (7, 3000.0, 7, 5, 0, 999.0)
        >>> found = gradient_spikes(CheckData(20, 0, step_records=records), History(), DEFAULT_THRESHOLDS)
        >>> [(int(r[0]), int(r[2]), int(r[5])) for r in found.outliers], found.exploded
        ([(7, 7, 5)], [])
    """
    # the interval's first step: the last check's (a step whose norm was not finite may have no record)
    previous = history.streaks.get("previous_check_step", -1)
    history.streaks["previous_check_step"] = data.step
    records = [r for r in data.step_records if math.isfinite(r[1]) and r[1] > 0]
    found = GradientSpikes(steps=len(records))
    if not records:
        return found
    first = previous if 0 <= previous < data.step else data.step - (data.step_records[-1][0] + 1)
    epochs = _epochs(records, data.epoch)
    pool = list(history.calm_norms)
    carried = statistics.median(pool) if pool else math.nan
    calm = [math.log(x / carried) for x in pool if carried > 0 and x > 0]  # the last calm steps' scatter
    ratios: list[float] = []
    for r in records:
        base = statistics.median(pool[-BASELINE_STEPS:]) if len(pool) >= _MIN_BASELINE else math.nan
        q = math.log(r[1] / base) if base > 0 else math.nan
        ratios.append(q)
        if not q > math.log(t["outlier_factor"]):
            pool.append(r[1])
    history.calm_norms = pool[-BASELINE_STEPS:]
    # the noise of calm steps against their baseline (the spikes themselves would inflate it)
    calm += [q for q in ratios if math.isfinite(q) and q <= math.log(t["outlier_factor"])]
    if len(calm) < 5:
        return found
    centre = statistics.median(calm)
    noise = centre + t["confidence_z"] * ROBUST_SIGMA * statistics.median(abs(q - centre) for q in calm)
    extremes = [r[5] for r in records if math.isfinite(r[5])]
    found.typical_input = statistics.median(extremes) if extremes else math.nan
    found.typical_norm = statistics.median(r[1] for r in records)
    spike = [q > max(math.log(t["outlier_factor"]), noise) for q in ratios]
    extreme = [math.isfinite(r[5]) and r[5] > t["outlier_factor"] * found.typical_input for r in records]
    # smaller outliers (a value typed with an extra zero): every step HEAVY x above the calm ones holds a
    # value HEAVY x the typical batch's largest, and no other step is, in two intervals or more
    heavy = [math.isfinite(r[5]) and r[5] > HEAVY * found.typical_input for r in records]
    high = [q > max(math.log(HEAVY), noise) for q in ratios]
    paired = [h and g for h, g in zip(heavy, high)]
    tied = any(paired) and not any(g and not h for h, g in zip(heavy, high))
    if tied:
        history.streaks["heavy_spike_checks"] = history.streaks.get("heavy_spike_checks", 0) + 1
    if tied and history.streaks["heavy_spike_checks"] >= 2:
        spike = [s or p for s, p in zip(spike, paired)]
        extreme = [x or p for x, p in zip(extreme, paired)]
    # a blow-up the run felt (weights or loss grew ``growth_high`` x), not a hard batch it did not feel
    felt = jump >= t["growth_high"]
    exploded = [
        felt and s and not x and q > max(math.log(t["explode_factor"]), noise)
        for s, x, q in zip(spike, extreme, ratios)
    ]

    def row(i: int) -> list[float]:
        r = records[i]
        return [first + r[0], epochs[i], r[2], math.exp(ratios[i]), r[5], r[3]]

    outliers: list[int] = []
    i = 0
    while i < len(records):
        if not spike[i]:
            i += 1
            continue
        j = i
        while j < len(records) and spike[j]:
            j += 1
        episode = range(i, j)
        if any(exploded[k] for k in episode):
            found.exploded += [row(k) for k in episode if exploded[k]]
            if extreme[i]:  # the episode began on an extreme batch: it set the explosion off
                found.triggers += [row(k) for k in episode if extreme[k]]
        else:
            outliers += [k for k in episode if extreme[k]]
        i = j
    extreme_spikes = len(outliers) + len(found.triggers)
    if extreme_spikes > min(MAX_OUTLIER_BATCHES, max(1, len(records) // 4)):
        found.triggers, outliers = [], []
    found.outliers = [row(k) for k in outliers]
    history.spikes = [*history.spikes, *found.outliers, *found.triggers][-_KEPT_SPIKES:]
    return found


def outliers_since(history: History, step: float) -> list[list[float]]:
    """The recorded outlier batches at or after ``step`` (after the first check: the early transient is no
    evidence)."""
    first = history.loss_steps[0] if history.loss_steps else 0
    return [s for s in history.spikes if s[0] >= max(step, first)]


def record_check(
    data: CheckData, history: History, ratio: float, lr: float, t: dict[str, float]
) -> GradientSpikes:
    """Keep what attribution needs from this check; returns its :func:`gradient_spikes`."""
    if not history.dead_step0 and (data.dead_start or data.dead_rows_start):
        history.dead_step0 = {**data.dead_rows_start, **data.dead_start}
    measured = [*data.dead.values(), *data.dead_rows.values()]
    if measured:
        history.dead_seen.append([float(data.step), max(measured), ratio, lr])
    before = history.last_param_norm if math.isfinite(history.last_param_norm) else data.param_norm_start
    loss_before = history.losses[-1] if history.losses else data.loss_head
    jumps = [data.param_norm / before if before > 0 else math.nan]
    jumps.append(data.loss_mean / loss_before if loss_before > 0 else math.nan)
    spikes = gradient_spikes(data, history, t, max((j for j in jumps if math.isfinite(j)), default=1.0))
    if math.isfinite(data.param_norm):
        history.last_param_norm = data.param_norm
    if data.first_nonfinite_step is not None and history.streaks.get("first_nonfinite_loss_step", -1) < 0:
        history.streaks["first_nonfinite_loss_step"] = data.first_nonfinite_step
        history.streaks["first_nonfinite_loss_on_nonfinite_batch"] = int(
            data.first_nonfinite_step in data.nonfinite_batch_steps
        )
    if data.grad_sampled and not data.nonfinite_weights and math.isfinite(data.param_norm):
        history.finite_weights_step = data.step
    # the output's spread over the batch's samples: a prediction the same for all has a gap of 0 and no spread
    gap, se, level = data.input_free_gap, data.input_free_gap_se, data.input_free_loss
    if math.isfinite(gap) and math.isfinite(level) and level != 0:
        history.streaks["spread_checks"] = history.streaks.get("spread_checks", 0) + 1
        if not abs(gap) + se <= SAME_OUTPUT * abs(level):  # a NaN spread: not known the same
            history.streaks["output_varied"] = 1
    return spikes


def dying_window(history: History, t: dict[str, float]) -> tuple[int, int, int]:
    """``(from, to, first)``: the steps between which the now-dead units began dying, and the
    index in ``history.dead_seen`` of that first check.
    """
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


def dead_unit_causes(
    dead: dict[str, float], data: CheckData, history: History, t: dict[str, float], lr_now: bool = False
) -> tuple[bool, Diagnosis]:
    """Why the layers of ``dead`` are dead: ``(by the LR, diagnosis)``; ``lr_now``: a ratio
    above ``ratio_high`` now or recently.
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
    spikes = sorted(s for s in outliers_since(history, start) if s[0] < end)
    few = 0 < len(spikes) <= MAX_OUTLIER_BATCHES
    # healthy at this LR right up to the outlier batches: the large steps after them are their aftermath
    calm_before = (
        few
        and first >= 1
        and rows[first - 1][2] <= t["ratio_high"]
        and (not math.isfinite(lr_at_death) or rows[first - 1][3] >= lr_at_death / 1.5)
    )
    worst = max(dead, key=lambda m: dead[m])

    init = Cause("initialisation", _some(dead_at_step_0=at_step0), _some(dead_at_step_0=alive_at_step0))
    lr = Cause(
        "learning_rate",
        {"update_ratio_when_dying": large} if lr_for else {},
        _some(
            dead_before_any_update=bool(at_step0),
            alive_at_same_lr_and_ratio=survived and {"step": int(survived[-1][0]), "ratio": survived[-1][2]},
            ratio_before_outlier_batches=calm_before
            and {"step": int(rows[first - 1][0]), "ratio": rows[first - 1][2]},
        ),
    )
    data_cause = Cause("outlier_batches")
    if few:
        data_cause.evidence_for = {
            "spike_steps": [int(s[0]) for s in spikes],
            "spike_batches": [f"epoch {int(s[1])} batch {int(s[2])}" for s in spikes],
            "grad_norm_x_before": max(s[3] for s in spikes),
            "largest_input": max(s[4] for s in spikes),
            "died_between_steps": [start, end],
        }
    else:
        many = {"outlier_batches": f"more than {MAX_OUTLIER_BATCHES} in the window"}
        data_cause.evidence_against = many if spikes else {"outlier_batches_when_dying": 0}
    fraction = dead[worst]
    # one prediction for every sample, though units of every dead layer fire: the samples reach the model
    # alike (a blank input), and units dead at step 0 are that input's symptom, not the initialisation's
    alike = history.streaks.get("spread_checks", 0) >= 1 and not history.streaks.get("output_varied")
    blank = Cause("inputs", _some(output_same_for_every_sample=alike and fraction < ALL_DEAD))
    if at_step0 and blank.evidence_for:
        cause: str | None = "inputs"
        text = f"dead_units at step {data.step}: `{worst}` {fraction:.0%} dead, one output for all samples"
        action = (
            "The model predicts the same for every sample though some units fire: the inputs reach it alike. "
            "Print a few batches: an encoding that writes nothing (`==` for `=`), a constant feature."
        )
    elif at_step0:
        cause = "initialisation"
        before = at_step0.get(worst, fraction)
        text = f"dead_units at step {data.step}: `{worst}` {fraction:.0%} dead, {before:.0%} at step 0"
        action = (
            f"Re-initialise `{worst}` (He/Kaiming, a zero or small positive bias) or use LeakyReLU/GELU: its "
            "units were dead at step 0, before any update, so the learning rate is not the cause."
        )
    elif few and (not lr_for or survived or calm_before):
        cause = "outlier_batches"
        history.streaks["outliers_named"] = 1
        steps = ", ".join(str(int(s[0])) for s in spikes[:3])
        text = (
            f"dead_units at step {data.step}: `{worst}` {fraction:.0%} dead after batches at steps {steps} "
            f"(gradient {max(s[3] for s in spikes):.0f}x the steps before)"
        )
        action = (
            f"Find the samples of the batches at steps {steps} ({_rows(spikes)}) and fix them (sentinel "
            "values such as -999, unscaled columns, corrupt rows): the units died right after them, at an LR "
            "that had not killed them before. Keep the LR."
        )
    elif lr_for:
        cause = "learning_rate"
        text = f"units died at update ratio {fmt(large)}"
        action = ""
    else:
        cause = None
        text = f"dead_units at step {data.step}: `{worst}` {fraction:.0%} of units never fire"
        action = ""
    causes = ranked([init, blank, data_cause, lr], cause)
    tell = (
        ""
        if cause is not None
        else "What tells them apart: the dead fraction on the first batch (dead at step 0: the "
        "initialisation), gradient spikes on a few batches with extreme values just before the units died "
        "(the data), or units dying at large update ratios at an LR that had not killed them before (the LR)."
    )
    return cause == "learning_rate", Diagnosis(headline(text), causes, cause, action, tell)


def _some(**evidence: Any) -> dict[str, Any]:
    """The entries of ``evidence`` that hold something."""
    return {k: v for k, v in evidence.items() if v}


def _rows(spikes: list[list[float]]) -> str:
    """Where the outlier batches' extreme values sit: ``batch b row r (|input| v)``, at most three."""
    return "; ".join(
        f"batch {int(s[2])}"
        + (f" row {int(s[5])}" if len(s) > 5 and s[5] >= 0 else "")
        + f" |input| {fmt(s[4])}"
        for s in spikes[:3]
    )


def weighed(name: str, holds: bool, evidence: dict[str, Any]) -> Cause:
    """A candidate cause whose ``evidence`` speaks for it when ``holds``, against it otherwise.

    Example:
        >>> weighed("no_gradient_signal", False, {"grad_rms": 0.07}).excluded
        True
    """
    return Cause(name, evidence if holds else {}, {} if holds else evidence)


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
