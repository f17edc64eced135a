"""The field gallery's problem runs seen in the loss, the validation and the input pipeline (overfitting,
loss plateau, data stall, non-finite activations), each proven real by a plain recording."""

from __future__ import annotations

import math
from typing import Any

import torch

from galleries.health.field._case import FieldCase, PlainRecorder
from galleries.health.field._field_data import (
    SensorDropout,
    SlowDecode,
    loader,
    random_label_data,
    random_label_sequences,
    sequence_data,
    teacher_data,
)
from galleries.health.field._field_models import (
    FieldModule,
    FReluMLP,
    GeluMLP,
    Highway,
    LogFeatureNet,
    SeqNet,
)
from galleries.health.field._field_proofs import (
    mean,
    median_max_update_ratio,
)

SGD, Adam, AdamW, RMSprop = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop


# ---- overfitting -------------------------------------------------------------------------------------------


def _proof_overfitting(best_epoch: int) -> Any:
    def proof(recorder: PlainRecorder) -> None:
        vals, trains = recorder.val_losses, recorder.epoch_train_losses
        assert vals.index(min(vals)) == best_epoch, vals
        rises = [v > 1.2 * min(vals) for v in vals[best_epoch + 1 :]]
        assert sum(rises) >= 3 and rises[-1], vals
        assert trains[-1] < 0.5 * trains[best_epoch], (trains[best_epoch], trains[-1])

    return proof


MLP_BEST_EPOCH, MLP_STEPS_PER_EPOCH = 11, 2


def _overfit_wide_mlp() -> Any:
    model = FieldModule(GeluMLP(16, 256, 4, depth=2), lambda p: SGD(p, lr=0.05, momentum=0.9))
    train = loader(teacher_data(32, label_noise=0.3, seed=1), 16)
    return model, train, loader(teacher_data(200, seed=2), 200, shuffle=False)


GRU_BEST_EPOCH, GRU_STEPS_PER_EPOCH = 13, 3


def _overfit_gru() -> Any:
    model = FieldModule(SeqNet("gru", 4, 64, 4), lambda p: AdamW(p, lr=3e-3, weight_decay=0.0))
    train = loader(sequence_data(48, seed=1), 16)
    return model, train, loader(sequence_data(200, seed=2), 200, shuffle=False)


# ---- loss_plateau ------------------------------------------------------------------------------------------


def _lstm_random_labels() -> Any:
    model = FieldModule(SeqNet("lstm", 4, 32, 4), lambda p: Adam(p, lr=1e-3))
    return model, loader(random_label_sequences(8192), 32), None


def _highway_rmsprop_random_labels() -> Any:
    model = FieldModule(Highway(16, 32, 4, depth=3), lambda p: RMSprop(p, lr=1e-3))
    return model, loader(random_label_data(8192), 32), None


def _proof_plateau(recorder: PlainRecorder) -> None:
    chance = math.log(4)
    blocks = [mean(recorder.losses[i : i + 20]) for i in range(0, len(recorder.losses) - 19, 20)]
    assert all(abs(b - chance) < 0.03 * chance for b in blocks), blocks
    ratio = median_max_update_ratio(recorder)
    assert 1e-4 < ratio < 0.05, f"median largest update ratio {ratio:.2e}"


# ---- data_stall --------------------------------------------------------------------------------------------


def _slow_decode() -> Any:
    model = FieldModule(FReluMLP(16, 32, 4), lambda p: Adam(p, lr=1e-3))
    return model, loader(SlowDecode(teacher_data(2048), 0.0025), 16), None


def _proof_stall(recorder: PlainRecorder) -> None:
    wait, step = sum(recorder.wait_s), sum(recorder.step_s)
    assert wait / (wait + step) > 0.6, f"waited {wait:.2f} s, stepped {step:.2f} s"


# ---- nonfinite_activations ---------------------------------------------------------------------------------

SENSOR_DIES = 140


def _log_features() -> Any:
    model = FieldModule(LogFeatureNet(8, 32, 3), lambda p: Adam(p, lr=1e-3))
    return model, loader(SensorDropout(200 * 16, SENSOR_DIES * 16), 16, shuffle=False), None


def _proof_nonfinite(recorder: PlainRecorder) -> None:
    losses = recorder.losses
    assert all(math.isfinite(x) for x in losses[:SENSOR_DIES]), "non-finite before the sensor died"
    assert not math.isfinite(losses[SENSOR_DIES]), losses[SENSOR_DIES - 2 : SENSOR_DIES + 2]


RUN_CASES = [
    FieldCase(
        "wide_mlp_tiny_train_overfits",
        _overfit_wide_mlp,
        "overfitting",
        (MLP_BEST_EPOCH + 1) * MLP_STEPS_PER_EPOCH,
        _proof_overfitting(MLP_BEST_EPOCH),
        max_steps=240,
        description="A 256-wide GELU MLP on 32 noisy samples (SGD + momentum), validated every epoch.",
    ),
    FieldCase(
        "gru_small_set_overfits",
        _overfit_gru,
        "overfitting",
        (GRU_BEST_EPOCH + 1) * GRU_STEPS_PER_EPOCH,
        _proof_overfitting(GRU_BEST_EPOCH),
        max_steps=240,
        description="A 64-unit GRU on 48 sequences (AdamW, no decay), validated every epoch.",
    ),
    FieldCase(
        "lstm_random_labels_plateau",
        _lstm_random_labels,
        "loss_plateau",
        0,
        _proof_plateau,
        max_steps=200,
        description="An LSTM on labels independent of the inputs, Adam at a normal lr: the loss stays "
        "at ln 4.",
    ),
    FieldCase(
        "highway_rmsprop_random_labels_plateau",
        _highway_rmsprop_random_labels,
        "loss_plateau",
        0,
        _proof_plateau,
        max_steps=200,
        description="A highway net with RMSprop on random labels: nothing to learn, the loss stays at ln 4.",
    ),
    FieldCase(
        "slow_decode_stall",
        _slow_decode,
        "data_stall",
        0,
        _proof_stall,
        max_steps=70,
        check_every=10,
        description="Every item sleeps 2.5 ms on the loading thread (num_workers=0): ~40 ms wait per "
        "~2 ms step.",
    ),
    FieldCase(
        "log_features_sensor_dies",
        _log_features,
        "nonfinite_activations",
        SENSOR_DIES,
        _proof_nonfinite,
        max_steps=200,
        description="log() of raw positive features; from step 140 one feature reads 0, so log gives -inf.",
    ),
]
