"""Every argument of our callbacks and the BatchMixer is checked at construction (issue 13): the error has
the right type and names the argument; ``True`` never passes for a number. One table for all of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    EarlyStopping,
    FinetuneSchedule,
    GradNormMonitor,
    HealthMonitor,
    InputPipelineMonitor,
    RunManifest,
    StabilityGuard,
)
from lightning_recipes.mixing import BatchMixer

NAN, INF = float("nan"), float("inf")
V, T = ValueError, TypeError

# (callback, argument, error type, invalid values)
TABLE: list[tuple[Any, str, type[Exception], tuple[Any, ...]]] = [
    (StabilityGuard, "mode", V, ("skip",)),
    (StabilityGuard, "check_every_n_steps", V, (0, True, 2.0)),
    (StabilityGuard, "snapshot_every_n_steps", V, (0, 2.5)),
    (StabilityGuard, "spike_window", V, (False,)),
    (StabilityGuard, "spike_warmup_steps", V, (-1,)),
    (StabilityGuard, "cooldown_steps", V, (-2,)),
    (StabilityGuard, "max_rollbacks", V, (1.5,)),
    (StabilityGuard, "rollback_window_steps", V, (True,)),
    (StabilityGuard, "spike_k", V, (0.0, NAN, True)),
    (StabilityGuard, "spike_rtol", V, (1.0, INF)),
    (StabilityGuard, "lr_factor", V, (0.0, 2, True)),
    (StabilityGuard, "check_grad_norm", T, (1,)),
    (StabilityGuard, "verbose", T, (None,)),
    (StabilityGuard, "checkpoint_dir", T, (3,)),
    (StabilityGuard, "snapshot_overhead", V, (0.0, 1.0)),
    (StabilityGuard, "finding_lr_factor", V, (0.0,)),
    (StabilityGuard, "act_on_findings", T, (1,)),
    (StabilityGuard, "spike_min_rise", V, (-0.1, INF, True)),
    (StabilityGuard, "spike_floor", V, (-1.0,)),
    (StabilityGuard, "val_monitor", T, (3,)),
    (EarlyStopping, "monitor", V, ("",)),
    (EarlyStopping, "monitor", T, (None,)),
    (EarlyStopping, "min_delta", V, (-0.1, True, NAN)),
    (EarlyStopping, "patience", V, (-1, True, 2.5)),
    (EarlyStopping, "verbose", T, ("no",)),
    (EarlyStopping, "mode", V, ("minimum",)),
    (EarlyStopping, "strict", T, (0,)),
    (EarlyStopping, "check_finite", T, (None,)),
    (EarlyStopping, "stopping_threshold", V, (NAN, True)),
    (EarlyStopping, "divergence_threshold", V, ("10",)),
    (EarlyStopping, "check_on_train_epoch_end", T, ("auto",)),
    (EarlyStopping, "log_rank_zero_only", T, (1,)),
    (EarlyStopping, "min_delta_mode", V, ("relative",)),
    (EarlyStopping, "start_from_epoch", V, (-1,)),
    (EarlyStopping, "start_from_step", V, (True, 1.5)),
    (EarlyStopping, "restore_best_weights", T, ("yes",)),
    (EarlyStopping, "best_weights_in_checkpoint", T, (None,)),
    (RunManifest, "dirpath", T, (5,)),
    (RunManifest, "filename", V, ("", "runs/manifest.json", None)),
    (RunManifest, "fingerprint_batches", V, (-1, 1.5, True)),
    (RunManifest, "repo_dir", T, (["."],)),
    (RunManifest, "extra", T, ([1, 2],)),
    (RunManifest, "log_to_loggers", T, ("yes",)),
    (AdaptiveGradClip, "percentile", V, (0, 101, True, "90")),
    (AdaptiveGradClip, "window", V, (0, 10.0, True)),
    (AdaptiveGradClip, "warmup_steps", V, (-1, False)),
    (AdaptiveGradClip, "max_norm", V, (0.0, INF, True)),
    (AdaptiveGradClip, "norm_type", V, (-2, "l2")),
    (AdaptiveGradClip, "warn_clipped_fraction", V, (0, 1.5)),
    (AdaptiveGradClip, "prefix", V, (None,)),
    (InputPipelineMonitor, "warn_wait_fraction", V, (0, 1.5, True)),
    (InputPipelineMonitor, "min_batches", V, (0, 2.0)),
    (InputPipelineMonitor, "prefix", V, (1,)),
    (FinetuneSchedule, "modules", V, ([],)),
    (FinetuneSchedule, "unfreeze_at_step", V, (-1,)),
    (FinetuneSchedule, "unfreeze_at_epoch", V, (1.5,)),
    (FinetuneSchedule, "warmup_steps", V, (True,)),
    (BatchMixer, "mixup_alpha", V, (-1.0,)),
    (BatchMixer, "cutmix_alpha", V, (NAN,)),
    (BatchMixer, "prob", V, (1.5,)),
    (BatchMixer, "switch_prob", V, (-0.1,)),
    (BatchMixer, "num_classes", V, (1,)),
    (BatchMixer, "seed", V, (-1,)),
    (BatchMixer, "correct_lam", T, (1,)),
    (BatchMixer, "sync_across_ranks", T, ("yes",)),
    (BatchMixer, "input_key", T, (1.5,)),
    (HealthMonitor, "check_every_n_steps", V, (0,)),
    (HealthMonitor, "group_by", V, (0,)),
    (HealthMonitor, "on_finding", V, ("stop",)),
    (HealthMonitor, "activation_samples", V, (-1,)),
    (HealthMonitor, "activation_samples", V, (51,)),  # more than check_every_n_steps (50)
    (HealthMonitor, "thresholds", V, ({"dead": 0.5},)),
    (HealthMonitor, "val_monitor", V, (3,)),
    (HealthMonitor, "prefix", V, (None,)),
    (HealthMonitor, "print_report", T, (1,)),
    (GradNormMonitor, "norm_type", V, (0, "two", True, NAN)),
    (GradNormMonitor, "group_by", V, (0, True, {"(": "x"}, [("a",)], {})),
    (GradNormMonitor, "log_every_n_steps", V, (0, True, 2.0)),
    (GradNormMonitor, "prefix", V, (3,)),
    (GradNormMonitor, "log_param_norm", T, (1, "yes", None)),
    (GradNormMonitor, "log_update_ratio", T, (1, "yes", None)),
]
CASES = [(cls, name, value, error) for cls, name, error, values in TABLE for value in values]
_REQUIRED = {
    EarlyStopping: {"monitor": "val_loss"},
    FinetuneSchedule: {"modules": "b", "unfreeze_at_step": 1},
}


@pytest.mark.parametrize(("cls", "name", "value", "error"), CASES, ids=lambda v: repr(v)[:30])
def test_an_invalid_argument_is_refused_naming_it(cls: Any, name: str, value: Any, error: type) -> None:
    kwargs = {**_REQUIRED.get(cls, {}), name: value}
    if cls is FinetuneSchedule and name == "unfreeze_at_epoch":
        del kwargs["unfreeze_at_step"]
    with pytest.raises(error) as caught:
        cls(**kwargs)
    assert f"`{name}`" in str(caught.value)


def test_a_batch_mixer_needs_one_method() -> None:
    with pytest.raises(ValueError, match="`mixup_alpha` and `cutmix_alpha` are both 0"):
        BatchMixer(mixup_alpha=0.0)


@pytest.mark.parametrize(
    "kwargs", [{"modules": "backbone"}, {"modules": "b", "unfreeze_at_step": 1, "unfreeze_at_epoch": 1}]
)
def test_finetune_schedule_needs_exactly_one_unfreeze_point(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one of `unfreeze_at_epoch` and `unfreeze_at_step`"):
        FinetuneSchedule(**kwargs)


def test_valid_edge_values_are_accepted(tmp_path: Path) -> None:
    StabilityGuard(
        check_every_n_steps=1,
        spike_k=None,
        spike_rtol=1.01,
        spike_warmup_steps=0,
        lr_factor=1,
        cooldown_steps=0,
        max_rollbacks=0,
        checkpoint_dir=tmp_path,
        verbose=False,
    )
    EarlyStopping(
        "val_acc",
        min_delta=0,
        patience=0,
        mode="max",
        stopping_threshold=1,
        divergence_threshold=-5.0,
        check_on_train_epoch_end=None,
        min_delta_mode="rel",
    )
    RunManifest(
        dirpath=tmp_path, fingerprint_batches=0, repo_dir=str(tmp_path), extra={}, log_to_loggers=False
    )
