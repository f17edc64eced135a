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

# (callback, argument, invalid value, error type)
CASES: list[tuple[Any, str, Any, type[Exception]]] = [
    (StabilityGuard, "mode", "skip", V),
    (StabilityGuard, "check_every_n_steps", 0, V),
    (StabilityGuard, "check_every_n_steps", True, V),
    (StabilityGuard, "check_every_n_steps", 2.0, V),
    (StabilityGuard, "snapshot_every_n_steps", 0, V),
    (StabilityGuard, "snapshot_every_n_steps", 2.5, V),
    (StabilityGuard, "spike_window", False, V),
    (StabilityGuard, "spike_warmup_steps", -1, V),
    (StabilityGuard, "cooldown_steps", -2, V),
    (StabilityGuard, "max_rollbacks", 1.5, V),
    (StabilityGuard, "rollback_window_steps", True, V),
    (StabilityGuard, "spike_k", 0.0, V),
    (StabilityGuard, "spike_k", NAN, V),
    (StabilityGuard, "spike_k", True, V),
    (StabilityGuard, "spike_rtol", 1.0, V),
    (StabilityGuard, "spike_rtol", INF, V),
    (StabilityGuard, "lr_factor", 0.0, V),
    (StabilityGuard, "lr_factor", 2, V),
    (StabilityGuard, "lr_factor", True, V),
    (StabilityGuard, "check_grad_norm", 1, T),
    (StabilityGuard, "verbose", None, T),
    (StabilityGuard, "checkpoint_dir", 3, T),
    (StabilityGuard, "snapshot_overhead", 0.0, V),
    (StabilityGuard, "snapshot_overhead", 1.0, V),
    (StabilityGuard, "finding_lr_factor", 0.0, V),
    (StabilityGuard, "act_on_findings", 1, T),
    (StabilityGuard, "spike_min_rise", -0.1, V),
    (StabilityGuard, "spike_min_rise", INF, V),
    (StabilityGuard, "spike_min_rise", True, V),
    (StabilityGuard, "spike_floor", -1.0, V),
    (StabilityGuard, "val_monitor", 3, T),
    (EarlyStopping, "monitor", "", V),
    (EarlyStopping, "monitor", None, T),
    (EarlyStopping, "min_delta", -0.1, V),
    (EarlyStopping, "min_delta", True, V),
    (EarlyStopping, "min_delta", NAN, V),
    (EarlyStopping, "patience", -1, V),
    (EarlyStopping, "patience", True, V),
    (EarlyStopping, "patience", 2.5, V),
    (EarlyStopping, "verbose", "no", T),
    (EarlyStopping, "mode", "minimum", V),
    (EarlyStopping, "strict", 0, T),
    (EarlyStopping, "check_finite", None, T),
    (EarlyStopping, "stopping_threshold", NAN, V),
    (EarlyStopping, "stopping_threshold", True, V),
    (EarlyStopping, "divergence_threshold", "10", V),
    (EarlyStopping, "check_on_train_epoch_end", "auto", T),
    (EarlyStopping, "log_rank_zero_only", 1, T),
    (EarlyStopping, "min_delta_mode", "relative", V),
    (EarlyStopping, "start_from_epoch", -1, V),
    (EarlyStopping, "start_from_step", True, V),
    (EarlyStopping, "start_from_step", 1.5, V),
    (EarlyStopping, "restore_best_weights", "yes", T),
    (EarlyStopping, "best_weights_in_checkpoint", None, T),
    (RunManifest, "dirpath", 5, T),
    (RunManifest, "filename", "", V),
    (RunManifest, "filename", "runs/manifest.json", V),
    (RunManifest, "filename", None, V),
    (RunManifest, "fingerprint_batches", -1, V),
    (RunManifest, "fingerprint_batches", 1.5, V),
    (RunManifest, "fingerprint_batches", True, V),
    (RunManifest, "repo_dir", ["."], T),
    (RunManifest, "extra", [1, 2], T),
    (RunManifest, "log_to_loggers", "yes", T),
    (AdaptiveGradClip, "percentile", 0, V),
    (AdaptiveGradClip, "percentile", 101, V),
    (AdaptiveGradClip, "percentile", True, V),
    (AdaptiveGradClip, "percentile", "90", V),
    (AdaptiveGradClip, "window", 0, V),
    (AdaptiveGradClip, "window", 10.0, V),
    (AdaptiveGradClip, "window", True, V),
    (AdaptiveGradClip, "warmup_steps", -1, V),
    (AdaptiveGradClip, "warmup_steps", False, V),
    (AdaptiveGradClip, "max_norm", 0.0, V),
    (AdaptiveGradClip, "max_norm", INF, V),
    (AdaptiveGradClip, "max_norm", True, V),
    (AdaptiveGradClip, "norm_type", -2, V),
    (AdaptiveGradClip, "norm_type", "l2", V),
    (AdaptiveGradClip, "warn_clipped_fraction", 0, V),
    (AdaptiveGradClip, "warn_clipped_fraction", 1.5, V),
    (AdaptiveGradClip, "prefix", None, V),
    (InputPipelineMonitor, "warn_wait_fraction", 0, V),
    (InputPipelineMonitor, "warn_wait_fraction", 1.5, V),
    (InputPipelineMonitor, "warn_wait_fraction", True, V),
    (InputPipelineMonitor, "min_batches", 0, V),
    (InputPipelineMonitor, "min_batches", 2.0, V),
    (InputPipelineMonitor, "prefix", 1, V),
    (FinetuneSchedule, "modules", [], V),
    (FinetuneSchedule, "unfreeze_at_step", -1, V),
    (FinetuneSchedule, "unfreeze_at_epoch", 1.5, V),
    (FinetuneSchedule, "warmup_steps", True, V),
    (BatchMixer, "mixup_alpha", -1.0, V),
    (BatchMixer, "cutmix_alpha", NAN, V),
    (BatchMixer, "prob", 1.5, V),
    (BatchMixer, "switch_prob", -0.1, V),
    (BatchMixer, "num_classes", 1, V),
    (BatchMixer, "seed", -1, V),
    (BatchMixer, "correct_lam", 1, T),
    (BatchMixer, "sync_across_ranks", "yes", T),
    (BatchMixer, "input_key", 1.5, T),
    (HealthMonitor, "check_every_n_steps", 0, V),
    (HealthMonitor, "group_by", 0, V),
    (HealthMonitor, "on_finding", "stop", V),
    (HealthMonitor, "activation_samples", -1, V),
    (HealthMonitor, "activation_samples", 51, V),  # more than check_every_n_steps (50)
    (HealthMonitor, "thresholds", {"dead": 0.5}, V),
    (HealthMonitor, "val_monitor", 3, V),
    (HealthMonitor, "prefix", None, V),
    (HealthMonitor, "print_report", 1, T),
    (GradNormMonitor, "norm_type", 0, V),
    (GradNormMonitor, "norm_type", "two", V),
    (GradNormMonitor, "norm_type", True, V),
    (GradNormMonitor, "norm_type", NAN, V),
    (GradNormMonitor, "group_by", 0, V),
    (GradNormMonitor, "group_by", True, V),
    (GradNormMonitor, "group_by", {"(": "x"}, V),
    (GradNormMonitor, "group_by", [("a",)], V),
    (GradNormMonitor, "group_by", {}, V),
    (GradNormMonitor, "log_every_n_steps", 0, V),
    (GradNormMonitor, "log_every_n_steps", True, V),
    (GradNormMonitor, "log_every_n_steps", 2.0, V),
    (GradNormMonitor, "prefix", 3, V),
    *[
        (GradNormMonitor, flag, v, T)
        for flag in ("log_param_norm", "log_update_ratio")
        for v in (1, "yes", None)
    ],
]
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
