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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl

from lightning_recipes._lightning_cli_config import with_lightning_cli_config
from lightning_recipes.sweep_args import RULES, SweepArgs

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main"]

#: The Trainer's arguments the sweep uses; read from a LightningCLI config's ``trainer`` section too.
SWEEP_TRAINER_KEYS = ("accelerator", "precision", "gradient_clip_val", "gradient_clip_algorithm")
#: The Trainer's arguments that set the run's length: ``speed_tune`` counts one-off costs against it.
RUN_LENGTH_KEYS = ("max_epochs", "max_steps", "limit_train_batches", "accumulate_grad_batches")
TRAINER_KEYS = (*SWEEP_TRAINER_KEYS, *RUN_LENGTH_KEYS)
# Top-level keys of this command's own parser; a LightningCLI config's other keys are dropped.
OWN_KEYS = (
    "model",
    "data",
    "lr",
    "min_lr",
    "max_lr",
    "num_steps",
    "rule",
    "seed",
    *TRAINER_KEYS,
    "yaml_key",
    "speed",
    "speed_options",
    "measure_steps",
    "repeats",
    "plot",
    "progress",
)


def build_parser() -> ArgumentParser:  # jsonargparse is imported lazily: it is slow to import
    """The jsonargparse parser behind ``lightning-recipes tune``."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="lightning-recipes tune",
        description="Run the LR range test (an exponential sweep over the module's own optimizer, on a copy) "
        "and print the suggested learning rate with the YAML to paste into a LightningCLI config.",
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="YAML file with these arguments, or the config your LightningCLI writes (its model and data "
        f"sections and trainer.{{{','.join(TRAINER_KEYS)}}} are used; the rest is ignored)",
    )
    parser.add_subclass_arguments(pl.LightningModule, "model", help="the LightningModule class and init_args")
    parser.add_subclass_arguments(
        pl.LightningDataModule, "data", help="the LightningDataModule and init_args"
    )
    parser.add_argument("--lr", type=bool, default=True, help="run the LR range test (default: true)")
    parser.add_argument("--min_lr", type=float, default=SweepArgs.min_lr, help="first LR of the sweep")
    parser.add_argument("--max_lr", type=float, default=SweepArgs.max_lr, help="last LR of the sweep")
    parser.add_argument(
        "--num_steps", type=int, default=SweepArgs.num_steps, help="sweep length in training steps"
    )
    parser.add_argument(
        "--rule", type=str, default=SweepArgs.rule, help=f"suggestion rule: {', '.join(RULES)}"
    )
    parser.add_argument("--seed", type=int, default=SweepArgs.seed, help="seed of the sweep (isolated)")
    parser.add_argument(
        "--accelerator",
        type=str,
        default="auto",
        help="the Trainer's accelerator the sweep runs on: cpu, gpu, cuda, mps, auto (default: auto)",
    )
    parser.add_argument(
        "--precision",
        type=str | None,
        default=None,
        help="the Trainer's precision: 32-true, bf16-mixed, 16-mixed, ... (default: the Trainer's, 32-true)",
    )
    parser.add_argument(
        "--gradient_clip_val",
        type=float | None,
        default=None,
        help="the run's Trainer(gradient_clip_val): the sweep clips as the run will (default: null, no clip)",
    )
    parser.add_argument(
        "--gradient_clip_algorithm",
        type=str | None,
        default=None,
        help="the run's Trainer(gradient_clip_algorithm): norm or value (default: null = norm)",
    )
    parser.add_argument(
        "--max_epochs",
        type=int | None,
        default=None,
        help="the run's Trainer(max_epochs): speed_tune weighs one-off costs (compile) against the run's "
        "length (default: null; with no max_steps either, one epoch)",
    )
    parser.add_argument("--max_steps", type=int, default=-1, help="the run's Trainer(max_steps) (-1: unset)")
    parser.add_argument(
        "--limit_train_batches",
        type=int | float | None,
        default=None,
        help="the run's Trainer(limit_train_batches) (default: null = all)",
    )
    parser.add_argument(
        "--accumulate_grad_batches",
        type=int,
        default=1,
        help="the run's Trainer(accumulate_grad_batches) (default: 1)",
    )
    parser.add_argument(
        "--yaml_key",
        type=str,
        default="model.init_args.recipe.lr",
        help="dotted key the YAML fragment sets (default: model.init_args.recipe.lr)",
    )
    parser.add_argument("--speed", type=bool, default=False, help="also run speed_tune (default: false)")
    parser.add_argument(
        "--speed_options", type=list[str] | None, default=None, help="speed_tune options (default: all)"
    )
    parser.add_argument("--measure_steps", type=int, default=10, help="speed_tune: timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="speed_tune: interleaved repeats")
    parser.add_argument("--plot", type=Path | None, default=None, help="save the curve to this image file")
    parser.add_argument(
        "--progress",
        type=bool,
        default=True,
        help="show a progress line while the sweep and speed_tune run (on a terminal; default: true)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 on success, 1 when the LR range test is inconclusive (no LR to suggest; the
    reason is printed), 2 on bad arguments.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes tune ...
        0
    """
    parser = build_parser()
    try:
        args = with_lightning_cli_config(list(sys.argv[1:] if argv is None else argv), OWN_KEYS, TRAINER_KEYS)
    except ValueError as err:
        print(f"lightning-recipes tune: {err}", file=sys.stderr)
        return 2
    try:
        config = parser.parse_args(args)
    except SystemExit as exit_:  # --help, or a parse error (already printed by jsonargparse)
        return int(exit_.code or 0)
    if not config.lr and not config.speed:
        print("lightning-recipes tune: nothing to do (`--lr false` and `--speed false`).", file=sys.stderr)
        return 2
    objects = parser.instantiate_classes(config)
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
    return pl.Trainer(**settings)


def _speed(config: Any, objects: Any) -> int:
    from rich.console import Console

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
        print(f"lightning-recipes tune: {err}", file=sys.stderr)
        return 2
    Console().print(result)
    print("Speed: paste into your LightningCLI config:\n" + result.to_yaml())
    return 0


def _lr(config: Any, objects: Any) -> int:
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from lightning_recipes.harness import CannotRunOnCopy
    from lightning_recipes.tune.lr_range_test import LRRangeTest

    try:
        args = SweepArgs(
            min_lr=config.min_lr,
            max_lr=config.max_lr,
            num_steps=config.num_steps,
            rule=config.rule,
            seed=config.seed,
        )
        finder = LRRangeTest(stop=True, print_result=False, progress=config.progress, args=args)
        trainer = _sweep_trainer(config, finder)
        # a copy: the fit attaches the Trainer and moves the module; speed_tune gets it as it was built
        trainer.fit(copy.deepcopy(objects.model), datamodule=objects.data)
    except (ValueError, TypeError, ImportError, MisconfigurationException, CannotRunOnCopy) as err:
        print(f"lightning-recipes tune: {err}", file=sys.stderr)
        return 2
    result = finder.result
    assert result is not None
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
