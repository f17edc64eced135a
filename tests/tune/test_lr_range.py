"""The LR range test."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any, ClassVar

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_recipes.harness import Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr, sweep_lr
from tests.tune._flat_models import AdamWClassifier


class RecordingSGD(torch.optim.SGD):
    """A real SGD that also records every group's LR at each step."""

    seen: ClassVar[list[list[float]]] = []

    def step(self, closure: Any = None) -> Any:
        RecordingSGD.seen.append([group["lr"] for group in self.param_groups])
        return super().step(closure)


class TwoGroupClassifier(TinyClassifier):
    def configure_optimizers(self) -> Any:
        head = list(self.head.parameters())
        head_ids = {id(p) for p in head}
        body = [p for p in self.parameters() if id(p) not in head_ids]
        return RecordingSGD([{"params": body, "lr": 1e-3}, {"params": head, "lr": 1e-2}], lr=1e-2)


def _loader(batch_size: int = 32, shuffle: bool = False) -> DataLoader:
    return random_classification_loader(num_samples=512, batch_size=batch_size, shuffle=shuffle)


def test_find_lr_leaves_model_optimizer_rng_and_loader_untouched():
    model = AdamWClassifier(lr=1e-3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loader = random_classification_loader(shuffle=True)
    loader_generator = torch.Generator().manual_seed(5)
    loader.generator = loader_generator
    generator_state = loader_generator.get_state()
    torch.manual_seed(123)
    rng = torch.get_rng_state()
    result = find_lr(model, train_dataloaders=loader, num_steps=30)
    assert torch.equal(rng, torch.get_rng_state())
    assert torch.equal(generator_state, loader_generator.get_state())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert result.optimizers == ["AdamW"] and len(result.lrs) == len(result.losses) <= 30
    again = find_lr(model, train_dataloaders=loader, num_steps=30)  # the same seed: the same curve
    assert again.losses == result.losses and again.suggestion == result.suggestion
    assert f"lr: {result.peak_lr:.3g}" in result.to_yaml() and result.to_yaml().startswith("model:\n")


def test_every_group_keeps_its_ratio_to_the_peak_group():
    RecordingSGD.seen.clear()
    result = find_lr(TwoGroupClassifier(), train_dataloaders=_loader(), num_steps=20, max_lr=1.0)
    assert result.group_scales == [[pytest.approx(0.1), pytest.approx(1.0)]]
    assert len(RecordingSGD.seen) == len(result.lrs)
    for (body, head), lr in zip(RecordingSGD.seen, result.lrs):
        assert head == pytest.approx(lr) and body == pytest.approx(0.1 * lr)


def test_the_sweep_is_exponential_and_stops_when_the_loss_diverges():
    result = find_lr(AdamWClassifier(lr=1e-3), train_dataloaders=_loader(), num_steps=60, max_lr=1e3)
    ratios = [b / a for a, b in zip(result.lrs, result.lrs[1:])]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
    assert result.stopped in ("diverged", "non-finite loss") and len(result.lrs) < 60
    assert 1e-5 < result.suggestion < result.lrs[-1]
    assert all(math.isfinite(loss) for loss in result.losses)


class BrokenOptimizers(TinyClassifier):
    def configure_optimizers(self) -> Any:
        raise RuntimeError("needs the trainer")


def test_what_find_lr_cannot_sweep_is_a_clear_error():
    with pytest.raises(ValueError, match="needs the trainer"):  # an error, not a silent stand-in
        find_lr(BrokenOptimizers(), train_dataloaders=_loader(), num_steps=10)
    with pytest.raises(ValueError, match="needs training data"):
        find_lr(TinyClassifier())
    manual = TinyClassifier()
    manual.automatic_optimization = False
    with pytest.raises(ValueError, match="find_lr cannot sweep TinyClassifier"):
        find_lr(manual, train_dataloaders=_loader(), num_steps=10)


def test_callback_applies_the_peak_lr_to_every_group_and_its_schedule():
    model = AdamWClassifier(lr=1e-3)
    finder = LRRangeTest(num_steps=30, apply=True, print_result=False)
    seen: dict[str, Any] = {}

    class Probe(pl.Callback):
        def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
            if not seen:
                seen["base_lrs"] = list(trainer.lr_scheduler_configs[0].scheduler.base_lrs)

    trainer = fast_trainer(max_steps=3, callbacks=[finder, Probe()])
    trainer.fit(model, _loader())
    assert finder.result is not None
    assert max(seen["base_lrs"]) == pytest.approx(finder.result.peak_lr)
    assert model.recipe_summary["peak_lr"] == pytest.approx(1e-3)  # what the module asked for


class RecordResult(pl.Callback):
    """Writes each rank's LR range result to a file."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        finder = next(c for c in trainer.callbacks if isinstance(c, LRRangeTest))
        assert finder.result is not None
        path = Path(self.folder) / f"rank{trainer.global_rank}.json"
        path.write_text(json.dumps(finder.result.to_dict()))


def test_ddp_every_rank_gets_the_single_process_curve_on_the_global_batch(tmp_path: Path):
    """2 ranks x 16 samples == 1 process x 32 in the DistributedSampler's order, up to all-reduce rounding."""
    assert pickle.loads(pickle.dumps(LRRangeTest(num_steps=25))).args == SweepArgs(num_steps=25)
    torch.manual_seed(0)
    dataset = _loader().dataset
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(0)).tolist()
    global_batches = DataLoader(dataset, batch_size=32, sampler=order)
    single = find_lr(TinyClassifier(), train_dataloaders=global_batches, num_steps=25)
    torch.manual_seed(0)  # the same initial weights (DDP broadcasts rank 0's)
    model = TinyClassifier()
    callbacks = [LRRangeTest(num_steps=25, stop=True, print_result=False), RecordResult(str(tmp_path))]
    trainer = fast_trainer(max_steps=1, devices=2, strategy="ddp_fork", callbacks=callbacks)
    trainer.fit(model, _loader(batch_size=16))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["losses"] == ranks[1]["losses"] and ranks[0]["suggestion"] == ranks[1]["suggestion"]
    assert ranks[0]["losses"] == pytest.approx(single.losses, rel=1e-4)
    assert ranks[0]["suggestion"] == pytest.approx(single.suggestion, rel=1e-6)


class RankBranchClassifier(TinyClassifier):
    """Rank 0 adds a branch the other ranks never call: its parameters have no gradient on rank 1."""

    def __init__(self) -> None:
        super().__init__()
        self.extra = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = super().forward(x)
        if torch.distributed.is_initialized() and torch.distributed.get_rank() == 0:
            logits = logits + self.extra(x)
        return logits


def test_ddp_sweep_with_a_parameter_unused_on_one_rank_agrees_across_ranks(tmp_path: Path):
    """Parameters unused on one rank join the all-reduce as zeros (before: gloo's collective mismatch)."""
    torch.manual_seed(0)
    callbacks = [LRRangeTest(num_steps=20, stop=True, print_result=False), RecordResult(str(tmp_path))]
    ddp = {"devices": 2, "strategy": "ddp_fork_find_unused_parameters_true"}
    trainer = fast_trainer(max_steps=1, callbacks=callbacks, **ddp)
    trainer.fit(RankBranchClassifier(), _loader(batch_size=16))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["losses"] == ranks[1]["losses"] and ranks[0]["suggestion"] == ranks[1]["suggestion"]
    assert len(ranks[0]["losses"]) >= 10 and all(math.isfinite(v) for v in ranks[0]["losses"])


class ShiftedLossClassifier(TinyClassifier):
    """The same loss minus 10: negative, as a Gaussian NLL or an ELBO can be."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return super().training_step(batch, batch_idx) - 10.0


def test_a_negative_loss_does_not_read_as_divergence():
    torch.manual_seed(0)
    plain = find_lr(TinyClassifier(), train_dataloaders=_loader(), num_steps=60)
    torch.manual_seed(0)
    shifted = find_lr(ShiftedLossClassifier(), train_dataloaders=_loader(), num_steps=60)
    assert len(shifted.lrs) >= len(plain.lrs)  # it stopped after 12 steps ("diverged") before
    assert shifted.losses[: len(plain.losses)] == pytest.approx([v - 10.0 for v in plain.losses], abs=1e-4)
    assert shifted.suggestion == pytest.approx(plain.suggestion, rel=2.0)


SWEEP_CASES = [
    ({"warmup_factor": -1.0}, "warmup_factor"),
    ({"warmup_factor": 0}, "warmup_factor"),
    ({"warmup_factor": "5"}, "warmup_factor"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"min_lr": 0.0}, "min_lr"),
    ({"min_lr": 1.0, "max_lr": 0.5}, "max_lr"),
    ({"num_steps": 5}, "num_steps"),
    ({"num_steps": 50.0}, "num_steps"),
    ({"rule": "valley"}, "rule"),
    ({"smoothing": 1.0}, "smoothing"),
    ({"divergence": 0.5}, "divergence"),
    ({"divergence": 1.0}, "divergence"),
]


@pytest.mark.parametrize(("kwargs", "name"), SWEEP_CASES)
def test_a_bad_sweep_argument_is_refused_by_every_entry_point(kwargs: dict[str, Any], name: str):
    """Before: warmup_factor and seed went unchecked (a negative warmup_factor gave a negative peak_lr)."""
    loader = random_classification_loader()
    calls = [
        lambda: LRRangeTest(**kwargs),
        lambda: find_lr(TinyClassifier(), train_dataloaders=loader, **kwargs),
        lambda: sweep_lr(Harness(TinyClassifier(), loader), **kwargs),
        lambda: SweepArgs.from_mapping(kwargs),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=f"`{name}`"):
            call()


def _find_lr_with(**kwargs: Any) -> Any:
    return find_lr(TinyClassifier(), train_dataloaders=random_classification_loader(), **kwargs)


@pytest.mark.parametrize(
    ("build", "kwargs", "error"),
    [
        (LRRangeTest, {"apply": "yes"}, TypeError),
        (LRRangeTest, {"stop": 1}, TypeError),
        (LRRangeTest, {"print_result": None}, TypeError),
        (LRRangeTest, {"progress": "no"}, TypeError),
        (LRRangeTest, {"args": {"num_steps": 20}}, TypeError),
        (LRRangeTest, {"args": SweepArgs(), "num_steps": 30}, TypeError),
        (_find_lr_with, {"gradient_clip_val": -1.0}, ValueError),
        (_find_lr_with, {"gradient_clip_algorithm": "l2"}, ValueError),
    ],
)
def test_the_callbacks_and_find_lrs_own_arguments_are_checked(
    build: Any, kwargs: dict[str, Any], error: type
):
    with pytest.raises(error, match=f"`{next(iter(kwargs))}`"):
        build(**kwargs)


def test_an_unknown_argument_lists_the_allowed_ones():
    with pytest.raises(TypeError) as raised:
        LRRangeTest(num_step=10)
    assert all(f"'{key}'" in str(raised.value) for key in ("num_step", "apply", *SweepArgs.field_names()))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['steps'\]"):
        SweepArgs.from_mapping({"steps": 50}, "LRRangeTest")
    with pytest.raises(ValueError, match="`LRRangeTest` must be a mapping"):
        SweepArgs.from_mapping([50], "LRRangeTest")


def test_good_arguments_are_kept_as_one_record():
    args = SweepArgs(num_steps=20, warmup_factor=3, seed=7)
    finder = LRRangeTest(num_steps=20, warmup_factor=3, seed=7, apply=True, stop=True, print_result=False)
    assert finder.args == args and finder.seed == 7 and finder.sweep["warmup_factor"] == 3
    assert (finder.apply, finder.stop, finder.print_result) == (True, True, False)
    assert LRRangeTest(args=args).args is args
