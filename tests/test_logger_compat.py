"""Every callback of ours, attached together, delivers its documented keys to each real logger.

One fit per logger (``WandbLogger`` offline, ``CSVLogger``, ``TensorBoardLogger``) with all callbacks on,
then the keys are read back from what the logger wrote: ``metrics.csv``/``hparams.yaml``, the TensorBoard
event files, the wandb run's summary and config. Each expected key must also appear in its callback's
docstring key table, so the documentation and this test cannot drift apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger

from lightning_recipes.callbacks.adaptive_grad_clip import AdaptiveGradClip
from lightning_recipes.callbacks.grad_norm_monitor import GradNormMonitor
from lightning_recipes.callbacks.input_pipeline_monitor import InputPipelineMonitor
from lightning_recipes.callbacks.run_manifest import RunManifest
from lightning_recipes.plots import read_metrics
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


@dataclass
class Spec:
    """A callback to attach, the metric keys it must log in the fit below, and its hparams sections."""

    build: Callable[[], Callback]
    metrics: list[str] = field(default_factory=list)
    hparams: list[str] = field(default_factory=list)
    documented_as: dict[str, str] = field(default_factory=dict)  # concrete key -> its docstring pattern


SPECS: dict[str, Spec] = {
    "GradNormMonitor": Spec(
        build=lambda: GradNormMonitor(group_by=1, log_param_norm=True, log_update_ratio=True),
        metrics=[
            "grad_norm/total",
            "grad_norm/total_mean",
            "grad_norm/total_max",
            "grad_norm/nonfinite_steps",
            "param_norm/total",
            "update_ratio/total",
            "grad_norm/hidden",
            "grad_norm/head",
            "update_ratio/head",
        ],
        documented_as={
            "grad_norm/hidden": "grad_norm/<group>",
            "grad_norm/head": "grad_norm/<group>",
            "update_ratio/head": "update_ratio/<group>",
        },
    ),
    "AdaptiveGradClip": Spec(
        build=lambda: AdaptiveGradClip(percentile=50, window=16, warmup_steps=2),
        metrics=["grad_clip/threshold", "grad_clip/clipped_fraction", "grad_clip/scale"],
    ),
    "InputPipelineMonitor": Spec(
        build=lambda: InputPipelineMonitor(),
        metrics=[
            "input_pipeline/wait_fraction",
            "input_pipeline/fetch_ms",
            "input_pipeline/fetch_ms_max",
            "input_pipeline/step_ms",
            "input_pipeline/epoch_start_s",
        ],
    ),
    "RunManifest": Spec(
        build=lambda: RunManifest(fingerprint_batches=2),
        hparams=["manifest/git", "manifest/trainer/effective_batch_size", "manifest/data_fingerprint/sha256"],
    ),
}


class _Model(TinyClassifier):
    """TinyClassifier with validation every epoch."""


def _documented(callback: Callback, key: str) -> bool:
    doc = inspect.getdoc(type(callback)) or ""
    top = key.split("/")[0]
    return f"``{key}``" in doc or (top == "manifest" and "manifest" in doc)


def _fit(tmp_path: Path, logger: Logger) -> list[Callback]:
    callbacks = [spec.build() for spec in SPECS.values()]
    trainer = fast_trainer(
        max_epochs=3,
        callbacks=callbacks,
        logger=logger,
        log_every_n_steps=2,
        default_root_dir=tmp_path,
    )
    trainer.fit(
        _Model(), random_classification_loader(), random_classification_loader(num_samples=64, seed=1)
    )
    return callbacks


def _csv_keys(logger: CSVLogger) -> tuple[set[str], dict[str, Any]]:
    hparams = yaml.safe_load((Path(logger.log_dir) / "hparams.yaml").read_text()) or {}
    return set(read_metrics(logger)), _flatten(hparams)


def _tensorboard_keys(logger: TensorBoardLogger) -> tuple[set[str], dict[str, Any]]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    scalars: set[str] = set()
    hparams: dict[str, Any] = {}
    for path in Path(logger.log_dir).glob("events.out.tfevents.*"):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag == "_hparams_/session_start_info":
                    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    hparams.update(dict(data.session_start_info.hparams))
                elif not value.tag.startswith("_hparams_"):
                    scalars.add(value.tag)
    return scalars, hparams


def _wandb_keys(logger: WandbLogger) -> tuple[set[str], dict[str, Any]]:
    summary = set(logger.experiment.summary.keys())
    return summary, _flatten(dict(logger.experiment.config))


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out[name] = value
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}/"))
    return out


@pytest.mark.parametrize("kind", ["csv", "tensorboard", "wandb"])
def test_every_callback_logs_documented_keys(kind: str, tmp_path: Path) -> None:
    import wandb

    if kind == "csv":
        logger: Logger = CSVLogger(tmp_path, name="csv")
    elif kind == "tensorboard":
        logger = TensorBoardLogger(tmp_path, name="tb")
    else:
        logger = WandbLogger(project="compat", save_dir=str(tmp_path), offline=True)
    try:
        callbacks = _fit(tmp_path, logger)
        if isinstance(logger, CSVLogger):
            metrics, hparams = _csv_keys(logger)
        elif isinstance(logger, TensorBoardLogger):
            metrics, hparams = _tensorboard_keys(logger)
        else:
            metrics, hparams = _wandb_keys(logger)
    finally:
        wandb.finish()
    assert "train_loss" in metrics  # the module's own logging still arrives beside ours
    problems = []
    for callback, (name, spec) in zip(callbacks, SPECS.items()):
        for key in spec.metrics:
            if not _documented(callback, spec.documented_as.get(key, key)):
                problems.append(f"{name}: {key!r} is not in its docstring key table")
            if key not in metrics:
                problems.append(f"{name}: metric {key!r} missing from {kind}")
        for key in spec.hparams:
            if not any(logged == key or logged.startswith(f"{key}/") for logged in hparams):
                problems.append(f"{name}: hparam {key!r} missing from {kind}")
    assert not problems, "\n".join(problems) + f"\nlogged metrics: {sorted(metrics)}"
