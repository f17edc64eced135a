"""Every argument of StabilityGuard, EarlyStopping and RunManifest is checked at construction (issue 13):
the error names the argument, the value and what is allowed; ``True`` never passes for a number."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lightning_recipes.callbacks import EarlyStopping, RunManifest, StabilityGuard

NAN, INF = float("nan"), float("inf")

# (argument, invalid value, error type, "what is allowed" as it appears in the message)
GUARD = [
    ("mode", "skip", ValueError, "one of ('raise', 'skip_step', 'rollback')"),
    ("check_every_n_steps", 0, ValueError, "an integer >= 1"),
    ("check_every_n_steps", True, ValueError, "an integer >= 1"),
    ("check_every_n_steps", 2.0, ValueError, "an integer >= 1"),
    ("snapshot_every_n_steps", 0, ValueError, "an integer >= 1"),
    ("spike_window", False, ValueError, "an integer >= 1"),
    ("spike_warmup_steps", -1, ValueError, "an integer >= 0"),
    ("cooldown_steps", -2, ValueError, "an integer >= 0"),
    ("max_rollbacks", 1.5, ValueError, "an integer >= 0"),
    ("rollback_window_steps", True, ValueError, "an integer >= 0"),
    ("spike_k", -1.0, ValueError, "a finite number > 0"),
    ("spike_k", NAN, ValueError, "a finite number > 0"),
    ("spike_k", True, ValueError, "a finite number > 0"),
    ("spike_rtol", 0.5, ValueError, "a number in (1, inf)"),
    ("spike_rtol", INF, ValueError, "a number in (1, inf)"),
    ("lr_factor", 1.5, ValueError, "a number in (0, 1]"),
    ("lr_factor", True, ValueError, "a number in (0, 1]"),
    ("check_grad_norm", "yes", TypeError, "True or False"),
    ("check_grad_norm", 1, TypeError, "True or False"),
    ("verbose", None, TypeError, "True or False"),
    ("checkpoint_dir", 3, TypeError, "a path (str or os.PathLike) or None"),
]
STOPPER = [
    ("monitor", "", ValueError, "the name of a logged metric"),
    ("monitor", None, TypeError, "the name of a logged metric (a str)"),
    ("min_delta", -0.1, ValueError, "a finite number >= 0"),
    ("min_delta", True, ValueError, "a finite number >= 0"),
    ("min_delta", NAN, ValueError, "a finite number >= 0"),
    ("patience", -1, ValueError, "an integer >= 0"),
    ("patience", True, ValueError, "an integer >= 0"),
    ("patience", 2.5, ValueError, "an integer >= 0"),
    ("verbose", "no", TypeError, "True or False"),
    ("mode", "minimum", ValueError, "one of ('min', 'max')"),
    ("strict", 0, TypeError, "True or False"),
    ("check_finite", None, TypeError, "True or False"),
    ("stopping_threshold", NAN, ValueError, "a finite number or None"),
    ("stopping_threshold", True, ValueError, "a finite number or None"),
    ("divergence_threshold", "10", ValueError, "a finite number or None"),
    ("check_on_train_epoch_end", "auto", TypeError, "True or False"),
    ("log_rank_zero_only", 1, TypeError, "True or False"),
    ("min_delta_mode", "relative", ValueError, "one of ('abs', 'rel')"),
    ("start_from_epoch", -1, ValueError, "an integer >= 0"),
    ("start_from_step", True, ValueError, "an integer >= 0"),
    ("restore_best_weights", "yes", TypeError, "True or False"),
    ("best_weights_in_checkpoint", None, TypeError, "True or False"),
]
MANIFEST = [
    ("dirpath", 5, TypeError, "a path (str or os.PathLike) or None"),
    ("filename", "", ValueError, "a plain file name"),
    ("filename", "runs/manifest.json", ValueError, "a plain file name"),
    ("filename", None, ValueError, "a plain file name"),
    ("fingerprint_batches", -1, ValueError, "an integer >= 0"),
    ("fingerprint_batches", True, ValueError, "an integer >= 0"),
    ("repo_dir", ["."], TypeError, "a path (str or os.PathLike) or None"),
    ("extra", [1, 2], TypeError, "a mapping or None"),
    ("log_to_loggers", "yes", TypeError, "True or False"),
]


def _expect(error: type[Exception], name: str, value: Any, allowed: str) -> Any:
    shown = type(value).__name__ if name == "extra" else repr(value)
    return pytest.raises(error, match=re.escape(f"`{name}` must be {allowed}, got {shown}"))


@pytest.mark.parametrize(("name", "value", "error", "allowed"), GUARD)
def test_stability_guard_rejects(name: str, value: Any, error: type[Exception], allowed: str) -> None:
    with _expect(error, name, value, allowed):
        StabilityGuard(**{name: value})


@pytest.mark.parametrize(("name", "value", "error", "allowed"), STOPPER)
def test_early_stopping_rejects(name: str, value: Any, error: type[Exception], allowed: str) -> None:
    kwargs: dict[str, Any] = {"monitor": "val_loss", name: value}
    with _expect(error, name, value, allowed):
        EarlyStopping(**kwargs)


@pytest.mark.parametrize(("name", "value", "error", "allowed"), MANIFEST)
def test_run_manifest_rejects(name: str, value: Any, error: type[Exception], allowed: str) -> None:
    with _expect(error, name, value, allowed):
        RunManifest(**{name: value})


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
