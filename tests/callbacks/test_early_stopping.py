"""EarlyStopping: value tables (patience, delta modes, warm-up, thresholds) -> stop epoch and restored
weights."""

from __future__ import annotations

import logging
import math
import pickle
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.callbacks import EarlyStopping as LightningEarlyStopping

from lightning_recipes.callbacks.early_stopping import EarlyStopping
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from tests.callbacks._shared import per_rank
from tests.helpers.weights import same, weights

NAN = float("nan")


class ScriptedMetric(TinyClassifier):
    """Trains normally; logs ``val_score = values[epoch]`` (``rank_values[rank][epoch]`` when given) at the
    end of each validation epoch, without ``sync_dist`` so that ranks may disagree on purpose."""

    def __init__(self, values: list[float], rank_values: dict[int, list[float]] | None = None) -> None:
        super().__init__()
        self.values = values
        self.rank_values = rank_values

    def on_validation_epoch_end(self) -> None:
        values = self.rank_values[self.global_rank] if self.rank_values else self.values
        self.log("val_score", torch.tensor(values[self.current_epoch]))


class WeightsPerEpoch(Callback):
    """Records the weights at the end of every validation (the weights each check judges); with
    ``directory`` also dumps, at the end of fit, this rank's records and final weights."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self.weights: dict[int, dict[str, torch.Tensor]] = {}

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.weights[trainer.current_epoch] = weights(pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.directory is None:
            return
        stopper = next(cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping))
        record = {"recorded": self.weights, "final": weights(pl_module), "best_epoch": stopper.best_epoch}
        record["stopped_epoch"] = stopper.stopped_epoch if trainer.should_stop else None
        record["reason"] = stopper.stopping_reason.name
        torch.save(record, Path(self.directory, f"rank{trainer.global_rank}.pt"))


LIMITS = {"limit_train_batches": 2, "limit_val_batches": 1}  # 2 steps and 1 validation batch an epoch


def _run(values: list[float], max_epochs: int, **kwargs: Any) -> tuple[EarlyStopping, WeightsPerEpoch, Any]:
    stopper = EarlyStopping("val_score", restore_best_weights=True, **kwargs)
    recorder = WeightsPerEpoch()
    trainer = fast_trainer(max_epochs=max_epochs, callbacks=[stopper, recorder], **LIMITS)
    model = ScriptedMetric(values)
    loader = random_classification_loader(batch_size=16)
    trainer.fit(model, loader, loader)
    return stopper, recorder, trainer


REL_0_1 = {"patience": 2, "min_delta": 0.1, "min_delta_mode": "rel"}
# values, kwargs, max_epochs, expected stop epoch (None: ran to max_epochs), expected best epoch, reason
TABLE = [
    # patience: improvements at 0, 1, 2; no improvement at 3, 4 -> stop at 4, best 2
    ([5, 4, 3, 3.5, 3.6, 3.7], {"patience": 2}, 6, 4, 2, "PATIENCE_EXHAUSTED"),
    # absolute min_delta 0.5: 4.6 is not 0.5 better than 5; 4.0 is; 3.8 and 3.7 are not better than 4.0 by 0.5
    ([5, 4.6, 4.0, 3.8, 3.7, 3.6], {"patience": 2, "min_delta": 0.5}, 6, 4, 2, "PATIENCE_EXHAUSTED"),
    # relative min_delta 0.1: thresholds 10 -> 9.0 (epoch 2 beats it), then 8.9 -> 8.01 (8.5, 8.1 do not)
    ([10, 9.5, 8.9, 8.5, 8.1, 7.9], REL_0_1, 6, 4, 2, "PATIENCE_EXHAUSTED"),
    # the same values with an absolute 0.1 improve every epoch: no stop, best is the last epoch
    ([10, 9.5, 8.9, 8.5, 8.1, 7.9], {"patience": 2, "min_delta": 0.1}, 6, None, 5, "NOT_STOPPED"),
    # warm-up by epoch: epochs 0-2 ignored (they would have stopped at 2), best 4, stop at 6
    ([1, 2, 3, 4, 3.5, 3.6, 3.7], {"patience": 2, "start_from_epoch": 3}, 7, 6, 4, "PATIENCE_EXHAUSTED"),
    # warm-up by step (2 steps per epoch: epoch e ends at step 2e + 2): from step 6 = epoch 2 on
    ([1, 2, 3, 4, 3.5, 3.6, 3.7], {"patience": 2, "start_from_step": 6}, 7, 4, 2, "PATIENCE_EXHAUSTED"),
    # mode max + stopping threshold: the check that reaches the threshold holds the best weights
    ([0.1, 0.5, 0.95, 0.2], {"mode": "max", "stopping_threshold": 0.9}, 4, 2, 2, "STOPPING_THRESHOLD"),
    # divergence threshold: stop at once, best weights from before
    ([3, 2, 50, 1], {"divergence_threshold": 10.0}, 4, 2, 1, "DIVERGENCE_THRESHOLD"),
    # non-finite metric
    ([3, 2, NAN, 1], {"patience": 5}, 4, 2, 1, "NON_FINITE_METRIC"),
    # max_epochs ends training: best weights are restored all the same
    ([3, 2, 1, 1.5], {"patience": 5}, 4, None, 2, "NOT_STOPPED"),
]


@pytest.mark.parametrize(("values", "kwargs", "max_epochs", "stop_epoch", "best_epoch", "reason"), TABLE)
def test_table_single_process(values, kwargs, max_epochs, stop_epoch, best_epoch, reason) -> None:
    stopper, recorder, trainer = _run(values, max_epochs, **kwargs)
    assert trainer.current_epoch == (max_epochs if stop_epoch is None else stop_epoch + 1)
    if stop_epoch is not None:
        assert trainer.should_stop and stopper.stopped_epoch == stop_epoch
        assert stopper.stopped_step == 2 * (stop_epoch + 1)
    assert stopper.stopping_reason.name == reason
    assert stopper.best_epoch == best_epoch
    assert stopper.restored_best_weights
    final = weights(trainer.lightning_module)
    assert same(final, recorder.weights[best_epoch])
    last = max(recorder.weights)
    if last != best_epoch:
        assert not same(final, recorder.weights[last])  # the restore really changed the weights


def test_is_a_lightning_early_stopping_and_keeps_its_rules() -> None:
    """Without the new options it is Lightning's callback: same stop epoch, state and reason."""
    values = [5, 4.6, 4.0, 3.8, 3.7, 3.6]
    ours = EarlyStopping("val_score", patience=2, min_delta=0.5)
    theirs = LightningEarlyStopping("val_score", patience=2, min_delta=0.5)
    assert isinstance(ours, LightningEarlyStopping)
    for stopper in (ours, theirs):
        trainer = fast_trainer(max_epochs=6, callbacks=[stopper], **LIMITS)
        loader = random_classification_loader(batch_size=16)
        trainer.fit(ScriptedMetric(values), loader, loader)
    assert trainer.early_stopping_callback is theirs
    state_ours, state_theirs = ours.state_dict(), theirs.state_dict()
    assert {k: state_ours[k] for k in state_theirs} == state_theirs
    assert ours.state_key == theirs.state_key


def test_state_dict_round_trip_and_resume_continues_the_count(tmp_path: Path) -> None:
    values = [5, 4, 3, 3.5, 3.6, 3.7, 3.8]
    stopper, _, trainer = _run(values, 4, patience=3)  # epochs 0-3: best at 2, wait count 1
    assert (stopper.wait_count, stopper.best_epoch, trainer.should_stop) == (1, 2, False)
    state = pickle.loads(pickle.dumps(stopper.state_dict()))
    assert same(state["best_weights"], stopper._best.model or {})
    clone = EarlyStopping("val_score", restore_best_weights=True)
    clone.load_state_dict(state)
    assert (clone.wait_count, clone.best_epoch, float(clone.best_score)) == (1, 2, 3.0)
    EarlyStopping("val_score").load_state_dict({})  # tolerant of old / empty state
    stopper.best_weights_in_checkpoint = False
    assert stopper.state_dict()["best_weights"] is None
    stopper.best_weights_in_checkpoint = True

    # resume from a checkpoint at the end of epoch 3: stops at epoch 5 (wait 2, 3), as an uninterrupted run
    path = tmp_path / "epoch3.ckpt"
    trainer.save_checkpoint(path)
    resumed = EarlyStopping("val_score", patience=3, restore_best_weights=True)
    recorder = WeightsPerEpoch()
    trainer2 = fast_trainer(max_epochs=10, callbacks=[resumed, recorder], **LIMITS)
    loader = random_classification_loader(batch_size=16)
    model = ScriptedMetric(values)
    trainer2.fit(model, loader, loader, ckpt_path=path)
    assert resumed.stopped_epoch == 5 and resumed.best_epoch == 2
    # the best weights predate the interruption: they came from the checkpoint
    assert same(weights(model), state["best_weights"])


@pytest.mark.parametrize(
    ("rank_values", "stop_epoch", "best_epoch"),
    [
        # rank 0 runs out of patience at 4; the metric improved on both ranks only at epochs 0 and 1
        ({0: [5, 4, 3, 3.5, 3.6, 3.7], 1: [5, 4, 4.5, 3.0, 2.9, 2.8]}, 4, 1),
        # rank 1 sees a NaN at epoch 2: every rank stops there; best weights of epoch 1 on both
        ({0: [5, 4, 3, 2, 1, 0], 1: [5, 4, NAN, 2, 1, 0]}, 2, 1),
    ],
)
def test_two_processes_one_rank_sees_a_different_metric(
    tmp_path: Path, rank_values: dict[int, list[float]], stop_epoch: int, best_epoch: int
) -> None:
    stopper = EarlyStopping("val_score", patience=2, restore_best_weights=True)
    callbacks = [stopper, WeightsPerEpoch(str(tmp_path))]
    trainer = fast_trainer(max_epochs=6, callbacks=callbacks, strategy="ddp_fork", devices=2, **LIMITS)
    loader = random_classification_loader(batch_size=16)
    trainer.fit(ScriptedMetric([], rank_values=rank_values), loader, loader)
    results = per_rank(tmp_path)
    for result in results:
        assert result["stopped_epoch"] == stop_epoch
        assert result["best_epoch"] == best_epoch
        assert same(result["final"], result["recorded"][best_epoch])
    assert same(results[0]["final"], results[1]["final"])
    assert not math.isnan(float(results[0]["final"]["head.bias"].sum()))


def test_verbose_logs_the_reason_and_the_restore(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        _run([5, 4, 3, 3.5, 3.6, 3.7], 6, patience=2, verbose=True)
    text = caplog.text
    assert "EarlyStopping stopped training at epoch 4 (step 10): PATIENCE_EXHAUSTED." in text
    assert "did not improve in the last 2 records" in text  # Lightning's own reason message
    assert "The best weights (epoch 2) will be restored when training ends." in text
    assert "EarlyStopping: restored the best weights (val_score=3 at epoch 2, step 6)." in text


_ODD_VALUES = [None, "x", "", [], {}, object(), -1, 0, 1.5, NAN, math.inf, True, 2, "min"]
_LIGHTNING_ARGS = [
    "monitor", "min_delta", "patience", "verbose", "mode", "strict", "check_finite", "stopping_threshold",
    "divergence_threshold", "check_on_train_epoch_end", "log_rank_zero_only",
]  # fmt: skip


@pytest.mark.parametrize("name", _LIGHTNING_ARGS)
def test_wherever_lightnings_constructor_raises_ours_raises_the_same_type(name: str) -> None:
    """What Lightning's constructor refuses, ours refuses with its exception type, naming the argument."""
    for value in _ODD_VALUES:
        kwargs = {"monitor": "val_loss", name: value}
        try:
            LightningEarlyStopping(**kwargs)
            theirs: type[BaseException] | None = None
        except Exception as error:
            theirs = type(error)
        try:
            EarlyStopping(**kwargs)
            ours: BaseException | None = None
        except Exception as error:
            ours = error
        if theirs is not None:
            assert isinstance(ours, theirs), (name, value, theirs, ours)
        if ours is not None:
            assert isinstance(ours, (ValueError, TypeError)) and f"`{name}`" in str(ours), (name, value, ours)


def test_unknown_mode_is_lightnings_misconfiguration_and_a_value_error() -> None:
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    for catch in (MisconfigurationException, ValueError):
        with pytest.raises(catch, match=r"`mode` must be one of \('min', 'max'\), got 'best'"):
            EarlyStopping("val_loss", mode="best")
    with pytest.raises(MisconfigurationException, match=r"`mode` can be .* got best"):  # Lightning's wording
        EarlyStopping("val_loss", mode="best")


@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
def test_pickled_callback_equals_the_original_after_fit_with_best_weights(copier: str) -> None:
    """Lightning's ``test_pickling`` compares ``vars()``: our best-weights Snapshots compare by value."""
    import copy

    fresh = EarlyStopping("val_score", restore_best_weights=True)
    stopper, _, _ = _run([5, 4, 3, 3.5], 4, patience=5)
    assert stopper._best.model is not None

    # the Trainer attaches the module's bound `log` / `log_dict` to every callback (Lightning's too); their
    # copies are bound to a copy of the module, so they never compare equal: left out
    def state(callback: EarlyStopping) -> dict[str, Any]:
        return {k: v for k, v in vars(callback).items() if k not in ("log", "log_dict")}

    for original in (fresh, stopper):
        copied = pickle.loads(pickle.dumps(original)) if copier == "pickle" else copy.deepcopy(original)
        assert state(copied) == state(original)
    assert vars(pickle.loads(pickle.dumps(fresh))) == vars(fresh)  # Lightning's test_pickling, exactly
    other = pickle.loads(pickle.dumps(stopper))
    next(iter(other._best.model.values())).add_(1.0)
    assert state(other) != state(stopper)
