"""The learning rate of every optimizer step of a planned run, from stepping the schedulers the way
Lightning does (:func:`lr_curves`), and the shape rules a sane curve meets (:func:`judge_curve`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.optim import Optimizer

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.harness.schedulers import SchedulerConfig

__all__ = ["CurveFinding", "LRCurves", "judge_curve", "lr_curves"]

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
