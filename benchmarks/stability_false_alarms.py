"""StabilityGuard's spike rule on real runs: false rollbacks on healthy fine-tuning, detection of blow-ups.

Every run carries three observing guards side by side (they record what they would do and never roll back, so
all judge the very same loss trace): ``new`` = ``StabilityGuard()`` defaults (the loss-noise model,
``stability_guard.exceeds_noise``, with issue 32's floor), ``no floor`` = the same with ``spike_floor=0``
(the rule between issues 22 and 32), ``old`` = the rule before issue 22 (``mean + 6 * population std`` of the
window, the rule ``OldRuleGuard`` keeps). Same check cadence (10), window (100) and warm-up (20).

Healthy runs (any event is a false rollback): a tiny randomly initialised ``transformers`` BERT
(2 layers, hidden 32, seq 16) fine-tuned with AdamW 3e-4 / 1e-3 on a synthetic text-classification task, with
and without dropout; an MLP on Gaussian blobs (AdamW 1e-3); the MLP converged on separable data with one hard
sample (``one_hard_sample``, AdamW 1e-2: batch loss ~0.007, 20-35x in that sample's batch; the last row).
Diverging runs (the fault starts at step ``FAULT_STEP``; detected = an event at or after it, delay = checks'
step - ``FAULT_STEP``): the learning rate multiplied by 300 (BERT, MLP), a loss multiplied by 3 / 100 for one
step (MLP). An event before
``FAULT_STEP`` counts as a false alarm. Run: ``python -m benchmarks.stability_false_alarms [--seeds 20]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor

from benchmarks.callback_overhead import machine
from lightning_recipes.callbacks import StabilityGuard
from lightning_recipes.testing import fast_trainer
from tests.helpers.finetune_models import (
    BlobsMLP,
    TinyBertFinetune,
    blobs,
    loader,
    one_hard_sample,
    text_classification,
)

__all__ = ["main"]

FAULT_STEP = 120


class ObservingGuard(StabilityGuard):
    """Records the events the guard would act on; never rolls back (so two rules judge one trace)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(verbose=False, snapshot_every_n_steps=10**9, act_on_findings=False, **kwargs)

    def _act(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: Any) -> None:
        event.action = "observed"
        self.events.append(event)


class OldRuleGuard(ObservingGuard):
    """The spike rule before issue 22: ``mean + spike_k * std`` (population) of the window."""

    def _spikes(self, losses: Tensor) -> Tensor | None:
        window = self._window
        if window.numel() < max(self.spike_warmup_steps, 1):
            return None
        return losses > window.mean() + 6.0 * window.std(correction=0)


class NoFloorGuard(ObservingGuard):
    """The noise model without issue 32's floor (the rule between issues 22 and 32)."""

    def __init__(self) -> None:
        super().__init__(spike_floor=0.0)


class Faulty(pl.Callback):
    """From ``FAULT_STEP`` on, multiplies the learning rate by ``lr_factor``; at ``FAULT_STEP`` only, the
    loss by ``loss_factor`` (in ``training_step``'s output, before backward)."""

    def __init__(self, lr_factor: float = 1.0, loss_factor: float = 1.0) -> None:
        self.lr_factor, self.loss_factor = lr_factor, loss_factor

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        if trainer.global_step == FAULT_STEP and self.lr_factor != 1.0:
            for group in trainer.optimizers[0].param_groups:
                group["lr"] *= self.lr_factor


def _with_loss_fault(module: pl.LightningModule, factor: float) -> pl.LightningModule:
    step = type(module).training_step

    def training_step(batch: Any, batch_idx: int) -> Tensor:
        loss = step(module, batch, batch_idx)
        return loss * factor if module.trainer.global_step == FAULT_STEP else loss

    module.training_step = training_step  # type: ignore[method-assign]
    return module


def _run(kind: str, seed: int, steps: int, lr: float, dropout: float = 0.1, **fault: float) -> dict[str, Any]:
    torch.manual_seed(seed)
    guards = {"new": ObservingGuard(), "no_floor": NoFloorGuard(), "old": OldRuleGuard()}
    loss_factor = fault.pop("loss_factor", 1.0)
    callbacks: list[pl.Callback] = [Faulty(**fault), *guards.values()]
    trainer = fast_trainer(max_steps=steps, max_epochs=-1, callbacks=callbacks)
    module: pl.LightningModule
    if kind == "bert":
        module, data = TinyBertFinetune(lr=lr, dropout=dropout), text_classification(seed=seed)
    else:
        module, data = BlobsMLP(lr=lr), (one_hard_sample if kind == "converged" else blobs)(seed=seed)
    if loss_factor != 1.0:
        module = _with_loss_fault(module, loss_factor)
    trainer.fit(module, loader(data, 32, seed))
    return {name: [(e.step, e.detected_at_step, e.cause) for e in g.events] for name, g in guards.items()}


def _summary(name: str, runs: list[dict[str, Any]], faulty: bool, start: int = FAULT_STEP) -> str:
    parts = []
    for rule in ("old", "no_floor", "new"):
        if not faulty:
            bad = [r[rule][0][0] for r in runs if r[rule]]  # the step of each run's first false event
            parts.append(f"{len(bad)}/{len(runs)} false rollbacks" + (f" (steps {bad[:6]})" if bad else ""))
            continue
        early = sum(any(e[0] < start for e in r[rule]) for r in runs)
        hits = [min(e for e in r[rule] if e[0] >= start) for r in runs if any(e[0] >= start for e in r[rule])]
        text = f"detected {len(hits)}/{len(runs)}"
        if hits:
            flagged = sorted({e[0] - start for e in hits})
            acted = sorted({e[1] - start for e in hits})
            text += f", flagged step = fault + {flagged}, acted at fault + {acted} steps"
        parts.append(text + (f", {early} false alarms before the fault" if early else ""))
    return f"| {name} | " + " | ".join(parts) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default="", help="comma-separated row numbers to run (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    seeds = range(args.seeds)
    print(machine())
    cases: list[tuple[str, bool, dict[str, Any]]] = [
        (
            "healthy BERT, AdamW 3e-4, no dropout, 150 steps",
            False,
            dict(kind="bert", steps=150, lr=3e-4, dropout=0.0),
        ),
        ("healthy BERT, AdamW 1e-3, dropout 0.1, 200 steps", False, dict(kind="bert", steps=200, lr=1e-3)),
        ("healthy MLP, AdamW 1e-3, 300 steps", False, dict(kind="mlp", steps=300, lr=1e-3)),
        ("BERT, lr x300 at step 120", True, dict(kind="bert", steps=160, lr=3e-4, lr_factor=300.0)),
        ("MLP, lr x300 at step 120", True, dict(kind="mlp", steps=160, lr=1e-3, lr_factor=300.0)),
        ("MLP, loss x100 at step 120", True, dict(kind="mlp", steps=160, lr=1e-3, loss_factor=100.0)),
        ("MLP, loss x3 at step 120", True, dict(kind="mlp", steps=160, lr=1e-3, loss_factor=3.0)),
        (
            "BERT, AdamW lr 0.3 from step 0 (blow-up inside the warm-up)",
            True,
            dict(kind="bert", steps=100, lr=0.3),
        ),
        (
            "healthy converged MLP, one hard sample, AdamW 1e-2, 340 steps",
            False,
            dict(kind="converged", steps=340, lr=1e-2),
        ),
    ]
    print(
        f"| runs (seeds 0..{args.seeds - 1}) | old rule (mean + 6 std) | noise model, no floor | new, floor |"
    )
    print("|---|---|---|---|")
    chosen = {int(i) for i in args.cases.split(",") if i}
    for row, (name, faulty, spec) in enumerate(cases):
        if chosen and row not in chosen:
            continue
        start = time.perf_counter()
        runs = [_run(seed=seed, **spec) for seed in seeds]
        print(
            _summary(name, runs, faulty, 0 if "from step 0" in name else FAULT_STEP)
            + f"  <!-- {time.perf_counter() - start:.0f} s -->",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
