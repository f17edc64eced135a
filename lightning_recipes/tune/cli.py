"""``lightning-recipes tune``: the LR range test and speed tuning of a model on a datamodule, from a shell.

Arguments follow LightningCLI (``--model pkg.Class --data pkg.DataModule --model.init_args.x 1``). Prints the
suggestion and the YAML fragment to paste into a LightningCLI config; ``--plot FILE`` saves the curve.
``--speed true`` also runs :func:`~lightning_recipes.tune.speed.speed_tune` and prints its table and YAML.

The sweep runs in a Trainer built from the run's settings (``--accelerator``, ``--precision``,
``--gradient_clip_val``, ``--gradient_clip_algorithm``: the Trainer's arguments, same names and values), on
one device. ``--config`` takes the YAML your LightningCLI writes (``python train.py fit --print_config``), as
``preflight --config`` does: its ``model`` and ``data`` sections, and those four from its ``trainer`` section;
the rest is ignored.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl

from lightning_recipes._cli_errors import UsageError, handle_usage_errors, require_extra
from lightning_recipes._cli_flags import as_names
from lightning_recipes._cli_jsonargparse import check_class_paths, instantiate, parse
from lightning_recipes._cli_tune_args import build_tune_parser, tune_front
from lightning_recipes.harness import quiet_trial
from lightning_recipes.harness.run_length import check_run_length
from lightning_recipes.sweep_args import SweepArgs

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main"]


def build_parser() -> ArgumentParser:
    """The jsonargparse parser behind ``lightning-recipes tune`` (:mod:`lightning_recipes._cli_tune_args`)."""
    return build_tune_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 on success, 1 when the LR range test is inconclusive (no LR to suggest; the
    reason is printed), 2 on bad arguments (one line on stderr).

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes tune ...
        0
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        return handle_usage_errors("tune", lambda: _run(arguments))
    except SystemExit as exit_:  # --help, --version, --print_config, --model.help
        return int(exit_.code or 0)


def _run(arguments: list[str]) -> int:
    parser = build_parser()
    args = tune_front(arguments)
    check_class_paths(args)
    config = parse(parser, args)
    if not config.lr and not config.speed:
        raise UsageError("nothing to do (`--lr false` and `--speed false`).")
    if config.model is None:
        raise UsageError("no model given: pass --model my_pkg.MyModel, or a --config with a model section")
    try:
        check_run_length(config.max_epochs, None if config.max_steps == -1 else config.max_steps)
    except ValueError as err:
        raise UsageError(str(err)) from err
    config.speed_options = as_names(config.speed_options)
    if config.plot is not None:  # before the sweep, not after it
        require_extra("matplotlib", "plots", f"--plot {config.plot}")
    objects = instantiate(parser, config)
    if config.lr:
        code = _lr(config, objects)
        if code:
            return code
    return _speed(config, objects) if config.speed else 0


def _sweep_trainer(config: Any, finder: Any) -> pl.Trainer:
    """The Trainer the sweep runs in: the run's accelerator, precision, clipping and length (one epoch when
    not given), one device, nothing written; ``finder`` sweeps at ``on_train_start`` and stops the fit before
    its first step."""
    settings: dict[str, Any] = {
        "accelerator": config.accelerator,
        "devices": 1,
        "gradient_clip_val": config.gradient_clip_val,
        "gradient_clip_algorithm": config.gradient_clip_algorithm,
        "callbacks": [finder],
        # the run's length, so that configure_optimizers builds the run's schedule (a warm-up of N steps
        # needs a run of N steps); the finder stops the fit after the sweep, before its first training step
        "max_epochs": 1 if config.max_epochs is None and config.max_steps == -1 else config.max_epochs,
        "max_steps": config.max_steps,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "limit_val_batches": 0,
    }
    if config.precision is not None:
        settings["precision"] = config.precision
    return pl.Trainer(**settings)


def _run_length_trainer(config: Any) -> pl.Trainer | None:
    """A Trainer that only carries the run's length (``max_epochs``, ``max_steps``, ...) for ``speed_tune``;
    ``None`` when neither ``max_epochs`` nor ``max_steps`` was given (``speed_tune`` then plans one epoch)."""
    if config.max_epochs is None and config.max_steps == -1:
        return None
    settings: dict[str, Any] = {
        "max_epochs": config.max_epochs,
        "max_steps": config.max_steps,
        "accumulate_grad_batches": config.accumulate_grad_batches,
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    if config.limit_train_batches is not None:
        settings["limit_train_batches"] = config.limit_train_batches
    with quiet_trial():  # never fitted: no banners
        return pl.Trainer(**settings)


def _speed(config: Any, objects: Any) -> int:
    from lightning_recipes._console import print_rich
    from lightning_recipes.tune.speed import speed_tune

    try:
        result = speed_tune(
            objects.model,
            datamodule=objects.data,
            trainer=_run_length_trainer(config),
            options=config.speed_options,
            measure_steps=config.measure_steps,
            repeats=config.repeats,
            seed=config.seed,
            progress=config.progress,
        )
    except (TypeError, ValueError) as err:
        raise UsageError(str(err)) from err
    print_rich(result)
    print("Speed: paste into your LightningCLI config:\n" + result.to_yaml())
    return 0


def _lr(config: Any, objects: Any) -> int:
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from lightning_recipes.harness import CannotRunOnCopy
    from lightning_recipes.tune import LRRangeTest

    try:
        args = SweepArgs(
            min_lr=config.min_lr,
            max_lr=config.max_lr,
            num_steps=config.num_steps,
            rule=config.rule,
            seed=config.seed,
        )
        finder = LRRangeTest(stop=True, print_result=False, progress=config.progress, args=args)
        with quiet_trial():  # no banners nor Lightning's deprecations: the command prints the result
            trainer = _sweep_trainer(config, finder)
            # a copy: the fit attaches the Trainer and moves the module; speed_tune gets it as it was built
            trainer.fit(copy.deepcopy(objects.model), datamodule=objects.data)
    except (ValueError, TypeError, ImportError, MisconfigurationException, CannotRunOnCopy) as err:
        raise UsageError(str(err)) from err
    result = finder.result
    if result is None:  # the Trainer's settings ended the fit before its first step
        raise UsageError(
            f"the LR range test did not run: the fit (max_epochs={config.max_epochs}, max_steps="
            f"{config.max_steps}) ended before its first training step"
        )
    if result.suggestion is None or result.peak_lr is None:
        print(f"LR range test: no learning rate to suggest. {result.summary()}")
        _save_plot(config, result)
        return 1
    print(
        f"LR range test ({', '.join(result.optimizers)}, {len(result.lrs)} steps, "
        f"stopped: {result.stopped})\n"
        f"  suggestion (constant LR, rule {result.rule}): {result.suggestion:.3g}\n"
        f"  peak_lr (warm-up schedules):               {result.peak_lr:.3g}\n"
        f"  {result.reason}\n"
        "Paste into your LightningCLI config:\n" + result.to_yaml(config.yaml_key)
    )
    _save_plot(config, result)
    return 0


def _save_plot(config: Any, result: Any) -> None:
    if config.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        result.plot().figure.savefig(config.plot, dpi=100, bbox_inches="tight")
        print(f"curve saved to {config.plot}")
