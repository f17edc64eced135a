"""``lightning-recipes tune``: the LR range test and, with ``--speed true``, speed tuning of a model from a
shell (LightningCLI-style arguments and ``--config``); prints the suggestion and the YAML to paste."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning_recipes.cli._args import (
    Option,
    UsageError,
    as_names,
    command_main,
    front,
    new_parser,
    parse_and_build,
    require_extra,
)
from lightning_recipes.sweep_args import RULES, SweepArgs

if TYPE_CHECKING:
    import lightning.pytorch as pl
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main", "parse"]

#: The Trainer's arguments the sweep uses, then those of the run's length (also read from a config's trainer).
TRAINER_KEYS = (
    "accelerator", "precision", "gradient_clip_val", "gradient_clip_algorithm",
    "max_epochs", "max_steps", "limit_train_batches", "accumulate_grad_batches",
)  # fmt: skip
_RUN = "the run's Trainer"
_OPTIONS: tuple[Option, ...] = (
    ("lr", bool, True, "run the LR range test (default: true)"),
    ("min_lr", float, SweepArgs.min_lr, "first LR of the sweep"),
    ("max_lr", float, SweepArgs.max_lr, "last LR of the sweep"),
    ("num_steps", int, SweepArgs.num_steps, "sweep length in training steps"),
    ("rule", str, SweepArgs.rule, f"suggestion rule: {', '.join(RULES)}"),
    ("seed", int, SweepArgs.seed, "seed of the sweep (isolated)"),
    ("accelerator", str, "auto",
     "the Trainer's accelerator the sweep runs on: cpu, gpu, cuda, mps, auto (default: auto)"),
    ("precision", str | None, None,
     "the Trainer's precision: 32-true, bf16-mixed, 16-mixed, ... (default: the Trainer's, 32-true)"),
    ("gradient_clip_val", float | None, None,
     f"{_RUN}(gradient_clip_val): the sweep clips as the run will (default: null, no clip)"),
    ("gradient_clip_algorithm", str | None, None,
     f"{_RUN}(gradient_clip_algorithm): norm or value (default: null = norm)"),
    ("max_epochs", int | None, None, f"{_RUN}(max_epochs): speed_tune weighs one-off costs (compile) against "
     "the run's length (default: null; with no max_steps either, one epoch)"),
    ("max_steps", int, -1, f"{_RUN}(max_steps) (-1: unset)"),
    ("limit_train_batches", int | float | None, None, f"{_RUN}(limit_train_batches) (default: null = all)"),
    ("accumulate_grad_batches", int, 1, f"{_RUN}(accumulate_grad_batches) (default: 1)"),
    ("yaml_key", str, "model.init_args.recipe.lr",
     "dotted key the YAML fragment sets (default: model.init_args.recipe.lr)"),
    ("speed", bool, False, "also run speed_tune (default: false)"),
    ("speed_options", list[str] | str | None, None,
     "speed_tune options (default: all): one name, names with commas or a list"),
    ("measure_steps", int, 10, "speed_tune: timed steps per run"),
    ("repeats", int, 3, "speed_tune: interleaved repeats"),
    ("plot", Path | None, None, 'save the curve to this image file (pip install "lightning-recipes[plots]")'),
    ("progress", bool, True,
     "show a progress line while the sweep and speed_tune run (on a terminal; default: true)"),
)  # fmt: skip


def build_parser(fast: bool = False) -> ArgumentParser:
    """The parser of ``lightning-recipes tune``; ``fast``: with stand-ins for Lightning's classes (for
    ``--help`` without torch)."""
    return new_parser(
        "lightning-recipes tune",
        "Run the LR range test (an exponential sweep over the module's own optimizer, on a copy, in a "
        "Trainer with the run's accelerator, precision and clipping) and print the suggested learning rate "
        "with the YAML to paste into a LightningCLI config; with --speed true also time the speed options "
        "(speed_tune: compile, channels-last, ...) and print the fastest combination. Exit 1 when the LR "
        "range test finds no learning rate to suggest. Arguments as LightningCLI's: --model my_pkg.MyModel "
        "--model.init_args.width 8, or --config with the YAML your LightningCLI writes.",
        fast,
        ",".join(TRAINER_KEYS),
        _OPTIONS,
    )


def parse(argv: Sequence[str]) -> list[str]:
    """The command line checked as far as it can be without the model (``_args.front``)."""
    return front("tune", build_parser, argv, _OPTIONS, TRAINER_KEYS)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; 0 on success, 1 when the LR range test finds no LR to suggest (the reason is printed),
    2 on bad arguments (one line on stderr).

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes tune ...
        0
    """
    return command_main("tune", _run, argv)


def _run(arguments: list[str]) -> int:
    from lightning_recipes.harness.run_length import check_run_length

    sweep: list[SweepArgs] = []

    def check(config: Any) -> None:
        if not config.lr and not config.speed:
            raise UsageError("nothing to do (`--lr false` and `--speed false`).")
        try:
            check_run_length(config.max_epochs, None if config.max_steps == -1 else config.max_steps)
            keys = ("min_lr", "max_lr", "num_steps", "rule", "seed")
            sweep.append(SweepArgs(**{key: config[key] for key in keys}))
        except ValueError as err:
            raise UsageError(str(err)) from err
        if config.plot is not None:  # before the sweep, not after it
            require_extra("matplotlib", "plots", f"--plot {config.plot}")

    config, objects = parse_and_build(build_parser(), parse(arguments), check)
    code = _lr(config, sweep[0], objects) if config.lr else 0
    return code or (_speed(config, objects) if config.speed else 0)


def _trainer(config: Any, **settings: Any) -> pl.Trainer:
    """The one silent internal Trainer with the run's length (one epoch when not given)."""
    from lightning_recipes.harness.silent_trainer import silent_trainer

    unset = config.max_epochs is None and config.max_steps == -1
    settings = {"max_epochs": 1 if unset else config.max_epochs, "max_steps": config.max_steps, **settings}
    return silent_trainer(**{key: value for key, value in settings.items() if value is not None})


def _lr(config: Any, args: SweepArgs, objects: Any) -> int:
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from lightning_recipes.harness import CannotRunOnCopy, quiet_trial
    from lightning_recipes.tune import LRRangeTest

    finder = LRRangeTest(stop=True, print_result=False, progress=config.progress, args=args)
    try:
        # the run's settings, so that configure_optimizers builds the run's schedule (a warm-up of N steps
        # needs a run of N steps); the finder sweeps at on_train_start and stops the fit before its first step
        trainer = _trainer(
            config,
            accelerator=config.accelerator,
            precision=config.precision,
            gradient_clip_val=config.gradient_clip_val,
            gradient_clip_algorithm=config.gradient_clip_algorithm,
            callbacks=[finder],
        )
        with quiet_trial():  # no banners nor Lightning's deprecations: the command prints the result
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
    else:
        print(
            f"LR range test ({', '.join(result.optimizers)}, {len(result.lrs)} steps, "
            f"stopped: {result.stopped})\n"
            f"  suggestion (constant LR, rule {result.rule}): {result.suggestion:.3g}\n"
            f"  peak_lr (warm-up schedules):               {result.peak_lr:.3g}\n"
            f"  {result.reason}\n"
            "Paste into your LightningCLI config:\n" + result.to_yaml(config.yaml_key)
        )
    if config.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        result.plot().figure.savefig(config.plot, dpi=100, bbox_inches="tight")
        print(f"curve saved to {config.plot}")
    return 1 if result.suggestion is None or result.peak_lr is None else 0


def _speed(config: Any, objects: Any) -> int:
    from lightning_recipes._console import print_rich
    from lightning_recipes.tune.speed import speed_tune

    # a Trainer that only carries the run's length; None when not given (speed_tune then plans one epoch)
    length = None
    if config.max_epochs is not None or config.max_steps != -1:
        length = _trainer(
            config,
            accelerator="cpu",
            limit_train_batches=config.limit_train_batches,
            accumulate_grad_batches=config.accumulate_grad_batches,
        )
    try:
        result = speed_tune(
            objects.model,
            datamodule=objects.data,
            trainer=length,
            options=as_names(config.speed_options),
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
