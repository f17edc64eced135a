"""``lightning-recipes tune``: the LR range test on a model class and a datamodule, from a shell.

Arguments follow LightningCLI (``--model pkg.Class --data pkg.DataModule --model.init_args.x 1``). Prints the
suggestion and the YAML fragment to paste into a LightningCLI config; ``--plot FILE`` saves the curve.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import lightning.pytorch as pl

from lightning_recipes.tune.suggest import RULES

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["build_parser", "main"]


def build_parser() -> ArgumentParser:  # jsonargparse is imported lazily: it is slow to import
    """The jsonargparse parser behind ``lightning-recipes tune``."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="lightning-recipes tune",
        description="Run the LR range test (an exponential sweep over the module's own optimizer, on a copy) "
        "and print the suggested learning rate with the YAML to paste into a LightningCLI config.",
    )
    parser.add_argument("--config", action=ActionConfigFile, help="YAML file with these arguments")
    parser.add_subclass_arguments(pl.LightningModule, "model", help="the LightningModule class and init_args")
    parser.add_subclass_arguments(
        pl.LightningDataModule, "data", help="the LightningDataModule and init_args"
    )
    parser.add_argument("--lr", type=bool, default=True, help="run the LR range test (default: true)")
    parser.add_argument("--min_lr", type=float, default=1e-7, help="first LR of the sweep")
    parser.add_argument("--max_lr", type=float, default=10.0, help="last LR of the sweep")
    parser.add_argument("--num_steps", type=int, default=100, help="sweep length in training steps")
    parser.add_argument("--rule", type=str, default="min_div_10", help=f"suggestion rule: {', '.join(RULES)}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sweep (isolated)")
    parser.add_argument(
        "--yaml_key",
        type=str,
        default="model.init_args.recipe.lr",
        help="dotted key the YAML fragment sets (default: model.init_args.recipe.lr)",
    )
    parser.add_argument("--plot", type=Path | None, default=None, help="save the curve to this image file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns 0 on success, 2 on bad arguments.

    Example:
        >>> main(["--help"])  # doctest: +ELLIPSIS
        usage: lightning-recipes tune ...
        0
    """
    from lightning_recipes.tune.lr_range import find_lr

    parser = build_parser()
    try:
        config = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:  # --help, or a parse error (already printed by jsonargparse)
        return int(exit_.code or 0)
    if not config.lr:
        print("lightning-recipes tune: nothing to do (`--lr false`).", file=sys.stderr)
        return 2
    objects = parser.instantiate_classes(config)
    try:
        result = find_lr(
            objects.model,
            datamodule=objects.data,
            min_lr=config.min_lr,
            max_lr=config.max_lr,
            num_steps=config.num_steps,
            rule=config.rule,
            seed=config.seed,
        )
    except ValueError as err:
        print(f"lightning-recipes tune: {err}", file=sys.stderr)
        return 2
    print(
        f"LR range test ({', '.join(result.optimizers)}, {len(result.lrs)} steps, "
        f"stopped: {result.stopped})\n"
        f"  suggestion (constant LR, rule {result.rule}): {result.suggestion:.3g}\n"
        f"  peak_lr (warm-up schedules):               {result.peak_lr:.3g}\n"
        "Paste into your LightningCLI config:\n" + result.to_yaml(config.yaml_key)
    )
    if config.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        result.plot().figure.savefig(config.plot, dpi=100, bbox_inches="tight")
        print(f"curve saved to {config.plot}")
    return 0
