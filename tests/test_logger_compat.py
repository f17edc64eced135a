"""Every callback of ours, attached together, delivers its documented keys (each in its docstring's table)
to each real logger, read back from what the logger wrote."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger
from torch.utils.data import DataLoader, Subset

from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    EarlyStopping,
    GradNormMonitor,
    InputPipelineMonitor,
    RunManifest,
    StabilityGuard,
)
from lightning_recipes.checks import (
    BatchIndependenceCheck,
    DataCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    OverfitBatchCheck,
    Preflight,
)
from lightning_recipes.plots import read_metrics
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


def _keys(area: str, *names: str) -> list[str]:
    return [f"{area}/{name}" for name in names]


@dataclass
class Spec:
    """A callback to attach, the metric keys it must log in the fit below, and its hparams sections."""

    build: Callable[[], Callback]
    metrics: list[str] = field(default_factory=list)
    hparams: list[str] = field(default_factory=list)
    documented_as: dict[str, str] = field(default_factory=dict)  # concrete key -> its docstring pattern
    check: Callable[[Any], None] | None = None  # assertions on the callback after the fit


SPECS: dict[str, Spec] = {
    "GradNormMonitor": Spec(
        build=lambda: GradNormMonitor(group_by=1, log_param_norm=True, log_update_ratio=True),
        metrics=[
            *_keys("grad_norm", "total", "total_mean", "total_max", "nonfinite_steps", "hidden", "head"),
            *_keys("param_norm", "total"),
            *_keys("update_ratio", "total", "head"),
        ],
        documented_as={
            "grad_norm/hidden": "grad_norm/<group>",
            "grad_norm/head": "grad_norm/<group>",
            "update_ratio/head": "update_ratio/<group>",
        },
    ),
    "AdaptiveGradClip": Spec(
        build=lambda: AdaptiveGradClip(percentile=50, window=16, warmup_steps=2, warn_clipped_fraction=None),
        metrics=["grad_clip/threshold", "grad_clip/clipped_fraction", "grad_clip/scale"],
    ),
    "InputPipelineMonitor": Spec(
        build=lambda: InputPipelineMonitor(warn_wait_fraction=None),
        metrics=_keys(
            "input_pipeline", "wait_fraction", "fetch_ms", "fetch_ms_max", "step_ms", "epoch_start_s"
        ),
    ),
    "StabilityGuard": Spec(
        build=lambda: StabilityGuard(check_every_n_steps=1, snapshot_every_n_steps=2),
        metrics=_keys("stability", "event_step", "event_cause", "event_value", "rollbacks", "skipped_steps"),
        check=lambda guard: _check_guard(guard),
    ),
    "EarlyStopping": Spec(
        build=lambda: EarlyStopping(monitor="val_loss", patience=5, restore_best_weights=True),
        check=lambda stopper: _check_stopper(stopper),
    ),
    "Preflight": Spec(
        # No wall-clock budget: on a busy machine a budget ends a check before it measures (no metric to log).
        build=lambda: Preflight(on_fail="warn", print_report=False, time_budget=None, total_time_budget=None),
        metrics=_keys("preflight", "init_loss", "overfit_batch", "input_independence", "batch_independence"),
    ),
    "RunManifest": Spec(
        build=lambda: RunManifest(fingerprint_batches=2),
        hparams=["manifest/git", "manifest/trainer/effective_batch_size", "manifest/data_fingerprint/sha256"],
    ),
}


NAN_STEP = 5


class _Model(TinyClassifier):
    """TinyClassifier whose loss is NaN once, at ``NAN_STEP`` of the logged fit (a StabilityGuard event)."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == NAN_STEP and self.logger is not None else loss


def _check_guard(guard: StabilityGuard) -> None:
    events = [(event.step, event.cause, event.action) for event in guard.events]
    assert events == [(NAN_STEP, "nonfinite_loss", "rollback")]


def _check_stopper(stopper: EarlyStopping) -> None:
    assert stopper.best_epoch >= 0 and stopper.restored_best_weights


def _documented(callback: Callback, key: str) -> bool:
    doc = inspect.getdoc(type(callback)) or ""
    top = key.split("/")[0]
    return f"``{key}``" in doc or (top == "manifest" and "manifest" in doc)


# The six checks also work one by one as callbacks (Preflight above runs them all); on_fail="raise".
CHECK_SPECS: dict[str, Spec] = {
    "DataCheck": Spec(build=lambda: DataCheck()),
    "InitLossCheck": Spec(build=lambda: InitLossCheck(), metrics=["preflight/init_loss"]),
    "GradFlowCheck": Spec(build=lambda: GradFlowCheck()),
    "BatchIndependenceCheck": Spec(build=lambda: BatchIndependenceCheck()),
    "OverfitBatchCheck": Spec(build=lambda: OverfitBatchCheck(), metrics=["preflight/overfit_batch"]),
    "InputIndependenceCheck": Spec(
        build=lambda: InputIndependenceCheck(time_budget=None), metrics=["preflight/input_independence"]
    ),
}


def _fit(tmp_path: Path, logger: Logger, specs: dict[str, Spec]) -> list[Callback]:
    callbacks = [spec.build() for spec in specs.values()]
    settings = {"logger": logger, "log_every_n_steps": 2, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_epochs=3, callbacks=callbacks, **settings)
    trainer.fit(_Model(lr=0.5), *_loaders())
    return callbacks


def _loaders() -> tuple[DataLoader, DataLoader]:
    """256 training and 64 held-out samples labelled by the same teacher (shuffled training loader)."""
    dataset = random_classification_loader(num_samples=320).dataset
    train, held_out = Subset(dataset, range(256)), Subset(dataset, range(256, 320))
    generator = torch.Generator().manual_seed(0)
    train_loader = DataLoader(train, batch_size=32, shuffle=True, generator=generator)
    return train_loader, DataLoader(held_out, batch_size=64)


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
    return set(logger.experiment.summary.keys()), _flatten(dict(logger.experiment.config))


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out[name] = value
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}/"))
    return out


# logger kind -> (its logger in a folder, the reader of what it wrote)
LOGGERS: dict[str, tuple[Callable[[Path], Logger], Callable[[Any], tuple[set[str], dict[str, Any]]]]] = {
    "csv": (lambda folder: CSVLogger(folder, name="csv"), _csv_keys),
    "tensorboard": (lambda folder: TensorBoardLogger(folder, name="tb"), _tensorboard_keys),
    "wandb": (lambda folder: WandbLogger(project="compat", save_dir=str(folder), offline=True), _wandb_keys),
}


def _run_and_read(kind: str, tmp_path: Path, specs: dict[str, Spec]) -> tuple[list[Callback], set[str], dict]:
    """The callbacks after the fit, the metric keys and flattened hparams written, ``"_dir"``: the log dir."""
    import wandb

    make_logger, read = LOGGERS[kind]
    logger = make_logger(tmp_path)
    try:
        callbacks = _fit(tmp_path, logger, specs)
        metrics, hparams = read(logger)
        run_dir = logger.log_dir if kind != "wandb" else tmp_path / "compat" / logger.experiment.id
        hparams["_dir"] = Path(run_dir)
    finally:
        wandb.finish()
    return callbacks, metrics, hparams


def _problems(
    kind: str, specs: dict[str, Spec], callbacks: list[Callback], metrics: set[str], hparams: dict
) -> list[str]:
    problems = []
    for callback, (name, spec) in zip(callbacks, specs.items()):
        for key in spec.metrics:
            if not _documented(callback, spec.documented_as.get(key, key)):
                problems.append(f"{name}: {key!r} is not in its docstring key table")
            if key not in metrics:
                problems.append(f"{name}: metric {key!r} missing from {kind}")
        for key in spec.hparams:
            if not any(logged == key or logged.startswith(f"{key}/") for logged in hparams):
                problems.append(f"{name}: hparam {key!r} missing from {kind}")
    return problems


@pytest.mark.parametrize("kind", ["csv", "tensorboard", "wandb"])
def test_every_callback_logs_documented_keys(kind: str, tmp_path: Path) -> None:
    callbacks, metrics, hparams = _run_and_read(kind, tmp_path, SPECS)
    assert "train_loss" in metrics  # the module's own logging still arrives beside ours
    problems = _problems(kind, SPECS, callbacks, metrics, hparams)
    assert not problems, "\n".join(problems) + f"\nlogged metrics: {sorted(metrics)}"
    for callback, spec in zip(callbacks, SPECS.values()):
        if spec.check is not None:
            spec.check(callback)
    # the manifest's values arrive as written (TensorBoard wraps each in a protobuf Value), its file in
    # the logger's directory
    (manifest,) = [c.manifest for c in callbacks if isinstance(c, RunManifest)]
    items = hparams.items()
    value = {k: getattr(v, v.WhichOneof("kind")) if hasattr(v, "WhichOneof") else v for k, v in items}
    assert value["manifest/data_fingerprint/sha256"] == manifest["data_fingerprint"]["sha256"]
    assert value["manifest/trainer/effective_batch_size"] == 32
    assert value["manifest/model/class"].endswith("._Model")
    assert (hparams["_dir"] / "manifest.json").is_file()


def test_each_check_as_its_own_callback(tmp_path: Path) -> None:
    # the checks log through the same `self.log` path as Preflight, whose keys every logger receives above
    kind = "csv"
    callbacks, metrics, hparams = _run_and_read(kind, tmp_path, CHECK_SPECS)
    problems = _problems(kind, CHECK_SPECS, callbacks, metrics, hparams)
    assert not problems, "\n".join(problems) + f"\nlogged metrics: {sorted(metrics)}"
    assert "train_loss" in metrics  # every check passed (on_fail="raise") and training went on
