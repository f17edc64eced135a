"""HealthMonitor's records: a check's :class:`CheckData`, the rules' :class:`History`, the problems,
their thresholds and the :class:`Finding` with its report table.

Example:
    >>> evidence_lines({"gl": 8.0, "update_ratio": {"a": 0.5, "b": 0.02, "c": 0.3, "d": 0.1}, "epoch": 2})
    ['gl 8', 'update ratio a 0.5, c 0.3, d 0.1 (+1 more)', 'epoch 2']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lightning_recipes._console import escape as _escape
from lightning_recipes._console import new_table, print_rich
from lightning_recipes._stats import Z

__all__ = [
    "DEFAULT_THRESHOLDS",
    "HEADLINE_LIMIT",
    "PROBLEMS",
    "PROBLEM_WORDS",
    "Cause",
    "CheckData",
    "Decision",
    "Diagnosed",
    "Diagnosis",
    "Finding",
    "History",
    "default_headline",
    "evidence_lines",
    "findings_table",
    "fmt",
    "format_value",
    "headline",
]


PROBLEMS = (
    "exploding_gradients",
    "vanishing_gradients",
    "dead_units",
    "saturated_activations",
    "lr_too_high",
    "lr_too_low",
    "loss_plateau",
    "overfitting",
    "data_stall",
    "nonfinite_activations",
    "not_learning",
    "outlier_batches",
)

DEFAULT_THRESHOLDS: dict[str, float] = {
    "explode_factor": 100.0,
    "vanish_ratio": 1e-3,
    "dead_fraction": 0.5,
    "saturated_fraction": 0.5,
    "ratio_high": 1e-2,
    "ratio_stuck": 3e-2,
    "rise_rtol": 0.03,
    "ratio_low": 1e-4,
    "ratio_low_sgd": 1e-6,
    "plateau_checks": 5,
    "plateau_rtol": 0.01,
    "plateau_progress": 0.2,
    "plateau_steps": 150,
    "overfit_gl": 5.0,
    "overfit_persist": 3,
    "stall_fraction": 0.5,
    "stall_min_s": 0.005,
    "persist_checks": 2,
    "confidence_z": Z,  # _stats.Z: one-sided 99%
    "anneal_fraction": 0.8,
    "growth_high": 2.0,
    "outlier_factor": 30.0,
    "trivial_band": 0.1,
    "spike_z": 10.0,  # accepted for old configs; no rule reads loss spikes (outlier_batches: gradients)
    "growth_blown": 10.0,
    "trained_share_low": 0.01,
}


@dataclass
class CheckData:
    """One check's numbers, combined over ranks (host floats)."""

    step: int
    epoch: int
    loss_mean: float = math.nan
    loss_nonfinite: int = 0
    #: finite per-step training losses in the interval (all ranks), their standard deviation, and the
    #: least-squares slope of loss against the step (per optimizer step) with its standard error
    loss_count: int = 0
    loss_std: float = math.nan
    loss_slope: float = math.nan
    loss_slope_se: float = math.nan
    #: the mean of the interval's first 5 losses (the first interval's: the loss at initialisation)
    loss_head: float = math.nan
    #: the interval's first loss (the first interval's: the loss before any update)
    loss_first: float = math.nan
    grad_sampled: bool = False
    grad_total: float = math.nan
    group_grad_rms: dict[str, float] = field(default_factory=dict)
    update_ratio: dict[str, float] = field(default_factory=dict)
    #: per parameter group (as ``group_grad_rms``): element count, the largest learning rate of the optimizer
    #: param_groups holding it at the sampled step, and its optimizer's family ("adaptive": Adam-family, Lion,
    #: LAMB, RMSprop, Adagrad, Adafactor ...; "sgd": SGD/ASGD; "other")
    group_numel: dict[str, int] = field(default_factory=dict)
    group_lr: dict[str, float] = field(default_factory=dict)
    group_family: dict[str, str] = field(default_factory=dict)
    #: groups holding an embedding table (sparse gradients: left out of the vanishing-gradient comparison)
    sparse_groups: set[str] = field(default_factory=set)
    dead: dict[str, float] = field(default_factory=dict)
    #: per tanh/sigmoid (an ``nn.Tanh``/``nn.Sigmoid`` module's name, or ``<layer>:sigmoid`` /
    #: ``<layer>:tanh`` for a function called on a Linear/Conv layer's output): the share of outputs in its
    #: flat part, and the mean local slope relative to its peak (the share of the gradient that passes)
    saturated: dict[str, float] = field(default_factory=dict)
    saturation_gain: dict[str, float] = field(default_factory=dict)
    #: the same at initialisation, ``(flat fraction, gain)`` per name: measured on the run's first batch,
    #: reported by the first check only
    saturated_init: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: per Linear/Conv layer (module name): the fraction of its weight's output rows whose gradient was
    #: exactly zero on the sampled step (a unit that no sample of the batch activated:
    #: dead through ``F.relu`` too)
    dead_rows: dict[str, float] = field(default_factory=dict)
    nonfinite_modules: list[str] = field(default_factory=list)
    #: of ``nonfinite_modules``, those whose inputs were already non-finite on a sampled batch
    nonfinite_inputs: list[str] = field(default_factory=list)
    #: parameter groups whose weights are inf/nan at the sampled step (a step wrote them)
    nonfinite_weights: list[str] = field(default_factory=list)
    #: the tracked parameters' total norm at the sampled step, and at the start of training
    param_norm: float = math.nan
    param_norm_start: float = math.nan
    wait_fraction: float | None = None
    #: where ``wait_fraction`` came from: "InputPipelineMonitor" or "host timing" (the monitor's own clock)
    wait_source: str | None = None
    #: the mean wait for data per training batch, in seconds (host timing; None when not measured)
    wait_per_batch_s: float | None = None
    #: (epoch, val, train, val_se, val_count): the validation loss, the mean training loss of its epoch, the
    #: validation loss's standard error from its per-batch values (NaN when unknown) and the number of
    #: validation samples it averaged (0 when unknown)
    validations: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    #: per optimizer step of the interval: (step within the interval, gradient norm, batch index, row of the
    #: batch with the largest |input|, its rank, that |input|) -- the row and value NaN/-1 when unknown
    step_records: list[tuple[int, float, int, int, int, float]] = field(default_factory=list)
    #: the run's planned optimizer steps (``trainer.estimated_stepping_batches``; inf when unbounded/unknown)
    planned_steps: float = math.inf
    #: the dead fractions measured on the run's first batch, before any update (as ``dead`` / ``dead_rows``;
    #: empty except at the first check of a run that started at step 0)
    dead_start: dict[str, float] = field(default_factory=dict)
    dead_rows_start: dict[str, float] = field(default_factory=dict)
    #: the interval's first step with a non-finite loss (None: none)
    first_nonfinite_step: int | None = None
    #: the interval's steps (as ``first_nonfinite_step``) whose batch held inf/nan (its largest |input|)
    nonfinite_batch_steps: list[int] = field(default_factory=list)
    #: the optimizers' class names (as ``type(optimizer).__name__``, unwrapped)
    optimizers: list[str] = field(default_factory=list)
    #: every parameter element of the module, trained or not (0: unknown); ``group_numel`` holds the trained
    model_numel: int = 0
    #: per module, the elements of its parameters that get gradients though no optimizer holds them
    unstepped_params: dict[str, int] = field(default_factory=dict)
    #: on the sampled batches, per element of each torch loss call: the loss of the model's prediction
    #: averaged over the batch (its best input-free guess) minus its own loss -- the mean and its standard
    #: error -- and that input-free loss's mean (NaN: no torch loss function seen)
    input_free_gap: float = math.nan
    input_free_gap_se: float = math.nan
    input_free_loss: float = math.nan
    loss_floor: float = math.nan  # the loss of the target as its own prediction (losses minimal there)
    #: a ``ReduceLROnPlateau`` in ``mode="max"`` monitors the validation loss (``val_monitor``): it waits for
    #: a rise, so every fall counts against it
    plateau_maximises_loss: bool = False


@dataclass
class History:
    """What the rules remember between checks (host floats; saved in ``state_dict``)."""

    losses: list[float] = field(default_factory=list)
    #: per check with a finite loss, parallel to ``losses``: the interval mean's standard error and the step
    loss_ses: list[float] = field(default_factory=list)
    loss_steps: list[int] = field(default_factory=list)
    #: per check with sampled updates: the run's update ratio (parameter-weighted median) and its largest LR
    ratios: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    #: the loss at initialisation (the first interval's first 5 steps; NaN: not known yet)
    start_loss: float = math.nan
    #: the largest dead fraction at the first check that measured one (-1: not measured yet)
    dead_at_start: float = -1.0
    grad_totals: list[float] = field(default_factory=list)
    vanish_ratios: list[float] = field(default_factory=list)
    validations: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    streaks: dict[str, int] = field(default_factory=dict)
    #: per check that timed the wait for data: ``[wait fraction, batches timed]`` (``data_stall``'s noise)
    waits: list[list[float]] = field(default_factory=list)
    #: per check that measured dead units: ``[step, largest dead fraction, update ratio, largest LR]`` (when
    #: units began dying, and at what step size)
    dead_seen: list[list[float]] = field(default_factory=list)
    #: per layer, the dead fraction on the run's first batch, before any update (empty: not measured)
    dead_step0: dict[str, float] = field(default_factory=dict)
    #: the run's outlier batches so far (``_health_causes.gradient_spikes``: ``[step, epoch, batch,
    #: gradient norm x the calm steps' before it, largest |input|, its row]``, the last 20)
    spikes: list[list[float]] = field(default_factory=list)
    #: the gradient norms of the last calm steps (no spike): the baseline the next interval is judged by
    calm_norms: list[float] = field(default_factory=list)
    #: the tracked parameters' norm at the last check (NaN: none yet)
    last_param_norm: float = math.nan
    #: the last check's step at which every weight was finite (-1: none yet)
    finite_weights_step: int = -1
    #: over the checks with no problem: ``[the last one's step, their largest LR, the largest update ratio of
    #: those whose loss fell significantly, the last of those's step]`` (empty: none yet): the LR and steps
    #: the run trains at healthily
    healthy: list[float] = field(default_factory=list)
    #: the largest LR of the run's first step (NaN: not known, a resumed run): the schedule's starting level
    start_lr: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        """Plain Python for ``state_dict``; the memory added by issue #35 (:data:`_LATER`) only where it holds
        something, so an older run's state saves and reloads exactly as it did."""
        state = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        unset = [
            k
            for k in _LATER
            if state[k] in ([], {}, -1) or (isinstance(state[k], float) and math.isnan(state[k]))
        ]
        return {k: v for k, v in state.items() if k not in unset}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> History:
        """The history saved by :meth:`to_dict` (states saved before the noise model kept the losses' errors
        and steps: unknown errors, steps by position)."""
        history = cls(**{k: _loaded(k, v) for k, v in state.items() if k in {f.name for f in fields(cls)}})
        if "loss_ses" not in state:
            history.loss_ses = [math.nan] * len(history.losses)
        if "loss_steps" not in state:
            history.loss_steps = list(range(len(history.losses)))
        return history


_LATER = (
    "waits",
    "dead_seen",
    "dead_step0",
    "spikes",
    "calm_norms",
    "last_param_norm",
    "finite_weights_step",
    "healthy",
    "start_lr",
)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value


def _loaded(name: str, value: Any) -> Any:
    """A saved field with its types: whole numbers for steps and streaks, floats otherwise."""
    if name == "validations":
        return [_validation(row) for row in value]
    cast: Any = int if name in ("loss_steps", "streaks", "finite_weights_step") else float
    if isinstance(value, dict):
        return {str(k): cast(v) for k, v in value.items()}
    if isinstance(value, list):
        return [[cast(x) for x in v] if isinstance(v, list) else cast(v) for v in value]
    return cast(value)


def _validation(row: Any) -> tuple[int, float, float, float, int]:
    """A saved validation row; rows saved before the standard error was kept have 3 entries."""
    epoch, val, train, *rest = row
    se, count = (float(rest[0]), int(rest[1])) if len(rest) >= 2 else (math.nan, 0)
    return int(epoch), float(val), float(train), se, count


Decision = tuple[dict[str, Any], str]  # (evidence, advice)

#: The longest :attr:`Finding.headline` (characters): one sentence with its numbers.
HEADLINE_LIMIT = 120


@dataclass
class Cause:
    """One candidate cause of a finding and the evidence the run holds for and against it (named numbers and
    facts, not prose).

    Example:
        >>> cause = Cause("initialisation", {"dead_at_step_0": 0.8}, {})
        >>> cause.supported, cause.excluded
        (True, False)
    """

    name: str
    evidence_for: dict[str, Any] = field(default_factory=dict)
    evidence_against: dict[str, Any] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        """Some evidence speaks for it."""
        return bool(self.evidence_for)

    @property
    def excluded(self) -> bool:
        """Evidence speaks against it and none for it."""
        return bool(self.evidence_against) and not self.evidence_for


@dataclass
class Diagnosis:
    """A rule's conclusion: ``headline``, the ``causes`` weighed, the named ``cause`` (or
    ``tell_apart``), one ``action``.
    """

    headline: str
    causes: list[Cause] = field(default_factory=list)
    cause: str | None = None
    action: str = ""
    tell_apart: str = ""


class Diagnosed(tuple[dict[str, Any], str]):
    """A rule's :data:`Decision` ``(evidence, advice)`` with its :class:`Diagnosis` attached (``.diagnosis``);
    unpacks and indexes as the plain pair.

    Example:
        >>> decision = Diagnosed({"loss": 2.3}, "Lower the LR.", Diagnosis("loss 2.3", cause="learning_rate"))
        >>> evidence, advice = decision
        >>> advice, decision.diagnosis.cause
        ('Lower the LR.', 'learning_rate')
    """

    diagnosis: Diagnosis

    def __new__(cls, evidence: dict[str, Any], advice: str, diagnosis: Diagnosis) -> Diagnosed:
        decision = super().__new__(cls, (evidence, advice))
        decision.diagnosis = diagnosis
        return decision


def fmt(value: float) -> str:
    """A number to 3 significant digits.

    Example:
        >>> fmt(0.0123456)
        '0.0123'
    """
    return f"{value:.3g}"


def headline(text: str) -> str:
    """``text`` cut to :data:`HEADLINE_LIMIT` characters (at a word, with an ellipsis when cut).

    Example:
        >>> len(headline("word " * 40)) <= HEADLINE_LIMIT
        True
    """
    text = " ".join(text.split())
    if len(text) <= HEADLINE_LIMIT:
        return text
    cut = text[: HEADLINE_LIMIT - 3].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "..."


#: Each problem in words: what is wrong, for a reader who does not know the monitor's names.
PROBLEM_WORDS = {
    "exploding_gradients": "the gradient norm jumped far above its earlier level",
    "vanishing_gradients": "the first layers barely learn: their updates are orders of magnitude smaller",
    "dead_units": "units that never activate (never a positive output, no gradient)",
    "saturated_activations": "tanh/sigmoid units stuck at their limits (their gradient is near zero)",
    "lr_too_high": "the learning rate is too high: large updates, and the loss does not fall or units die",
    "lr_too_low": "the learning rate is too low: the updates are tiny and the loss barely moves",
    "loss_plateau": "the training loss stopped improving",
    "overfitting": "the validation loss rises while the training loss falls",
    "data_stall": "the training loop spends most of its time waiting for data",
    "nonfinite_activations": "a layer produced NaN or inf outputs",
    "not_learning": "the loss sits where it started (the level of knowing nothing) and nothing moves it",
    "outlier_batches": "a few batches carried gradients far above their neighbours' (outlier samples)",
}

_TOP = 3  # entries shown of a dict or a list
_SUMMARY_ITEMS = 3  # evidence entries in a summary
_WHOLE = ("step", "epoch", "checks", "count", "batches", "nonfinite_losses")


@dataclass
class Finding:
    """One problem the monitor found, as a record: what, when, the numbers, the causes weighed, one action.

    ``str(finding)`` is :meth:`summary`.

    Attributes:
        problem: One of :data:`HealthMonitor.PROBLEMS`.
        step: ``trainer.global_step`` at the check that found it.
        epoch: ``trainer.current_epoch`` then.
        evidence: The numbers that triggered it (per layer where relevant).
        advice: What to change, concretely: the ``action`` for the named ``cause``, or (no cause named) what
            tells the candidates apart.
        headline: One sentence with the numbers, at most :data:`HEADLINE_LIMIT` (120) characters.
        causes: The candidate causes considered, most likely first, each with its evidence for and against.
        cause: The root cause the evidence names; ``None`` when it does not separate the candidates.
        action: One action, for ``cause`` (``""`` when no cause is named).
        tell_apart: When no cause is named: what would tell the candidates apart.

    Example:
        >>> f = Finding("dead_units", 40, 0, {"dead_fraction": {"fc1": 0.8}}, "Re-initialise `fc1`.",
        ...             headline="dead_units at step 40: fc1 80% dead since step 0", cause="initialisation",
        ...             causes=[{"name": "initialisation", "evidence_for": {"dead_at_step_0": 0.8}}])
        >>> f.causes[0].evidence_for, f.cause
        ({'dead_at_step_0': 0.8}, 'initialisation')
    """

    problem: str
    step: int
    epoch: int
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""
    headline: str = ""
    causes: list[Cause] = field(default_factory=list)
    cause: str | None = None
    action: str = ""
    tell_apart: str = ""

    def __post_init__(self) -> None:
        # records loaded from a state_dict / JSON hold the causes as dicts
        self.causes = [c if isinstance(c, Cause) else Cause(**c) for c in self.causes]
        if not self.headline:
            self.headline = default_headline(self.problem, self.step, self.evidence)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain Python; fields at their defaults (or, the headline, derivable from the
        evidence) are left out, so a record of an older run saves exactly as it did."""
        record = asdict(self)
        for key, default in (("causes", []), ("cause", None), ("action", ""), ("tell_apart", "")):
            if record[key] == default:
                del record[key]
        if record["headline"] == default_headline(self.problem, self.step, self.evidence):
            del record["headline"]
        return record

    def summary(self) -> str:
        """One or two sentences: the problem, when, the key numbers (the first 3 evidence entries, 2 per
        dict), and the advice (the long form of :attr:`headline`)."""
        words = PROBLEM_WORDS.get(self.problem, self.problem.replace("_", " "))
        numbers = [_line(k, v, top=2) for k, v in list(self.evidence.items())[:_SUMMARY_ITEMS]]
        text = f"{self.problem} at step {self.step} (epoch {self.epoch}): {words}"
        if numbers:
            text += "; " + "; ".join(numbers)
        text += "."
        if self.advice:
            text += " " + self.advice.strip()
        return text

    def __str__(self) -> str:
        return self.summary()


def default_headline(problem: str, step: int, evidence: Mapping[str, Any]) -> str:
    """A headline from the problem, the step and the first evidence entries (2 per dict), as much as fits
    :data:`HEADLINE_LIMIT`.

    Example:
        >>> default_headline("data_stall", 60, {"wait_fraction": 0.81, "wait_per_batch_ms": 40.0})
        'data_stall at step 60: wait fraction 0.81; wait per batch ms 40'
    """
    text = f"{problem} at step {step}"
    for i, (key, value) in enumerate(list(evidence.items())[:_SUMMARY_ITEMS]):
        part = ("; " if i else ": ") + _line(key, value, top=2)
        if len(text) + len(part) > HEADLINE_LIMIT:
            break
        text += part
    return headline(text)


def format_value(value: Any, key: str = "", top: int = _TOP) -> str:
    """``value`` short: a float to 3 significant digits, a whole count as is, a dict of numbers as its ``top``
    largest ``name value`` pairs (``+N more``), a list as its first ``top`` items (``+N more``)."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and (abs(value) < 1e6 or _whole(key)):
            return str(int(value))
        return f"{value:.3g}"
    if isinstance(value, Mapping):
        items = list(value.items())
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in items):
            items.sort(key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else -math.inf)
        shown = ", ".join(f"{k} {format_value(v, str(k), top)}" for k, v in items[:top])
        return shown + _more(len(items) - top)
    if isinstance(value, Sequence) and not isinstance(value, str):
        shown = ", ".join(format_value(v, key, top) for v in value[:top])
        return f"[{shown}{_more(len(value) - top)}]"
    return str(value)


def evidence_lines(evidence: Mapping[str, Any], top: int = _TOP) -> list[str]:
    """The evidence as short ``name value`` lines (underscores in names read as spaces)."""
    return [_line(key, value, top) for key, value in evidence.items()]


def findings_table(findings: Sequence[Finding], checks: int, print_table: bool = True) -> Any:
    """A ``rich`` table of ``findings`` (plain text without rich), fit to the terminal;
    printed and ``None`` by default, returned with ``print_table=False``.
    """
    title = f"HealthMonitor: {len(findings)} finding(s) in {checks} check(s)"
    table = new_table(title, show_lines=True)
    table.add_column("problem", overflow="fold", ratio=2, min_width=12)
    table.add_column("when", no_wrap=True)
    table.add_column("evidence", overflow="fold", ratio=3, min_width=14)
    table.add_column("advice", overflow="fold", ratio=3, min_width=14)
    for f in findings:
        words = PROBLEM_WORDS.get(f.problem, "")
        problem = f"[bold]{_escape(f.problem)}[/bold]" + (f"\n{words}" if words else "")
        lines = evidence_lines(f.evidence)
        if f.causes and "cause" not in f.evidence:  # the record's verdict, when the evidence does not say it
            lines.insert(0, f"cause {f.cause or 'not separated by the evidence'}")
        evidence = "\n".join(lines)
        when = f"step {f.step}\nepoch {f.epoch}"
        table.add_row(problem, when, _escape(evidence), _escape(f.advice))
    if print_table:
        print_rich(table)
        return None
    return table


def _line(key: str, value: Any, top: int) -> str:
    return f"{key.replace('_', ' ')} {format_value(value, key, top)}"


def _more(extra: int) -> str:
    return f" (+{extra} more)" if extra > 0 else ""


def _whole(key: str) -> bool:
    return any(word in key for word in _WHOLE)
