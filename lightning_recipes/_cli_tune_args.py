"""The arguments of ``lightning-recipes tune``: one parser builder for ``--help`` (no torch imported) and for
the run, and the checks of the command line that need no model.

Example:
    >>> parser = build_tune_parser(fast=True)
    >>> "--gradient_clip_val" in parser.format_help()
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lightning_recipes._cli_flags import BOOL_FLAG, HELP_AND_VERSION, asks_for_help, normalise_flags
from lightning_recipes._cli_jsonargparse import add_model_and_data, new_parser, parse, require_model
from lightning_recipes._lightning_cli_config import with_lightning_cli_config
from lightning_recipes.sweep_args import RULES, SweepArgs

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

__all__ = ["OWN_KEYS", "SWEEP_TRAINER_KEYS", "TRAINER_KEYS", "build_tune_parser", "tune_front"]

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


def build_tune_parser(fast: bool = False) -> ArgumentParser:
    """The parser behind ``lightning-recipes tune``; ``fast``: with stand-ins for Lightning's classes, for
    ``--help`` (the same options; it cannot build the model)."""
    from jsonargparse import ActionConfigFile

    parser = new_parser(
        "lightning-recipes tune",
        "Run the LR range test (an exponential sweep over the module's own optimizer, on a copy, in a "
        "Trainer with the run's accelerator, precision and clipping) and print the suggested learning rate "
        "with the YAML to paste into a LightningCLI config; with --speed true also time the speed options "
        "(speed_tune: compile, channels-last, ...) and print the fastest combination. Exit 1 when the LR "
        "range test finds no learning rate to suggest. Arguments as LightningCLI's: --model my_pkg.MyModel "
        "--model.init_args.width 8, or --config with the YAML your LightningCLI writes.",
        fast,
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="YAML file with these arguments, or the config your LightningCLI writes (its model and data "
        f"sections and trainer.{{{','.join(TRAINER_KEYS)}}} are used; the rest is ignored)",
    )
    add_model_and_data(parser, fast)
    parser.add_argument(
        "--lr", type=bool, default=True, **BOOL_FLAG, help="run the LR range test (default: true)"
    )
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
    parser.add_argument(
        "--speed", type=bool, default=False, **BOOL_FLAG, help="also run speed_tune (default: false)"
    )
    parser.add_argument(
        "--speed_options",
        type=list[str] | str | None,
        default=None,
        help="speed_tune options (default: all): one name, names with commas or a list",
    )
    parser.add_argument("--measure_steps", type=int, default=10, help="speed_tune: timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="speed_tune: interleaved repeats")
    parser.add_argument(
        "--plot",
        type=Path | None,
        default=None,
        help='save the curve to this image file (pip install "lightning-recipes[plots]")',
    )
    parser.add_argument(
        "--progress",
        type=bool,
        default=True,
        **BOOL_FLAG,
        help="show a progress line while the sweep and speed_tune run (on a terminal; default: true)",
    )
    return parser


def tune_front(argv: Sequence[str]) -> list[str]:
    """The command line checked as far as it can be without the model, ready for the parser: flags in
    snake_case, each ``--config`` replaced by the parts of the file the command reads. ``--help`` and
    ``--version`` print and exit here.

    Raises:
        UsageError: For no model, a missing or malformed ``--config`` file.
    """
    args = normalise_flags(argv)
    if asks_for_help(args):
        parse(build_tune_parser(fast=True), [a for a in args if a in HELP_AND_VERSION][:1])
    require_model(args, "tune")
    return with_lightning_cli_config(args, OWN_KEYS, TRAINER_KEYS)
