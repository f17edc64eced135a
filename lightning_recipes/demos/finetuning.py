"""The fine-tuning demo: pretrain the digits CNN on digits 0-4, fine-tune on a few examples of 5-9 with
layer-wise LR decay + freeze-then-unfreeze, against plain fine-tuning and training from scratch."""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.callbacks.finetune_schedule import FinetuneSchedule
from lightning_recipes.cli.demo import build_finetune_parser as build_parser  # built without torch
from lightning_recipes.cli.demo import check_demo_args
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.demos.model import RecipeDigitsCNN
from lightning_recipes.harness.silent_trainer import silent_trainer
from lightning_recipes.recipe import OptimizerRecipe

__all__ = ["VARIANTS", "build_parser", "format_table", "main", "run_finetune_demo", "split_digits"]

#: The fine-tuning variants compared, in table order.
VARIANTS = ("scratch", "plain", "recipe")
_LR = 3e-3


def split_digits(seed: int = 0, shots: int = 10) -> dict[str, TensorDataset]:
    """The digits split for transfer: ``pretrain`` (train split, 0-4), ``finetune`` (``shots`` training
    images of each of 5-9) and ``val`` (held-out 5-9); labels of 5-9 become 0-4.

    Example:
        >>> data = split_digits(shots=3)
        >>> len(data["finetune"]), sorted(set(data["val"].tensors[1].tolist()))
        (15, [0, 1, 2, 3, 4])
    """
    datamodule = DigitsDataModule(seed=seed)
    datamodule.setup()
    assert datamodule.train_set is not None and datamodule.val_set is not None
    x, y = datamodule.train_set.tensors
    vx, vy = datamodule.val_set.tensors
    generator = torch.Generator().manual_seed(seed)
    few = []
    for label in range(5, 10):
        members = torch.nonzero(y == label).flatten()
        few.append(members[torch.randperm(len(members), generator=generator)[:shots]])
    index = torch.cat(few)
    late = vy >= 5
    return {
        "pretrain": TensorDataset(x[y < 5], y[y < 5]),
        "finetune": TensorDataset(x[index], y[index] - 5),
        "val": TensorDataset(vx[late], vy[late] - 5),
    }


def _shuffled(data: TensorDataset, batch_size: int, seed: int) -> DataLoader:
    return DataLoader(
        data, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )


def _accuracy(model: torch.nn.Module, data: TensorDataset) -> float:
    model.eval()
    with torch.no_grad():
        x, y = data.tensors
        return float((model(x).argmax(-1) == y).float().mean())  # sync: once, after training


def _finetune(
    variant: str, pretrained: dict[str, torch.Tensor], data: dict[str, TensorDataset], seed: int, epochs: int
) -> float:
    pl.seed_everything(seed + 1000, verbose=False)  # the same new head and batch order for every variant
    model = RecipeDigitsCNN(num_classes=5, dropout=0.0)
    if variant != "scratch":
        body = {k: v for k, v in pretrained.items() if not k.startswith("head.")}
        model.load_state_dict(body, strict=False)
    callbacks: list[Any] = []
    recipe: dict[str, Any] = {"optimizer": "adamw", "lr": _LR, "weight_decay": 0.05, "warmup_ratio": 0.1}
    if variant == "recipe":
        recipe["layer_decay"] = 0.5
        callbacks.append(FinetuneSchedule("features", unfreeze_at_epoch=epochs // 3, warmup_steps=4))
    model.recipe = OptimizerRecipe(**recipe)
    loader = _shuffled(data["finetune"], 16, seed)
    silent_trainer(max_epochs=epochs, callbacks=callbacks).fit(model, loader)
    return _accuracy(model, data["val"])


def run_finetune_demo(
    seeds: Sequence[int] = (0, 1, 2), shots: int = 10, pretrain_epochs: int = 6, finetune_epochs: int = 15
) -> dict[str, Any]:
    """Pretrain on digits 0-4 per seed, then fine-tune each variant on ``shots`` images per digit 5-9
    (``scratch``, ``plain``, ``recipe``: layer decay and a ``FinetuneSchedule``): accuracies, mean, spread."""
    started = time.perf_counter()
    results: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    pretrain_accuracy = []
    for seed in seeds:
        data = split_digits(seed, shots)
        pl.seed_everything(seed, verbose=False)
        source = RecipeDigitsCNN(num_classes=5)
        source.recipe = OptimizerRecipe(optimizer="adamw", lr=_LR, weight_decay=0.05, warmup_ratio=0.1)
        silent_trainer(max_epochs=pretrain_epochs).fit(source, _shuffled(data["pretrain"], 64, seed))
        pretrain_accuracy.append(_accuracy(source, data["pretrain"]))
        pretrained = {k: v.detach().clone() for k, v in source.state_dict().items()}
        for variant in VARIANTS:
            results[variant].append(_finetune(variant, pretrained, data, seed, finetune_epochs))
    summary = {
        variant: {
            "accuracy": values,
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        }
        for variant, values in results.items()
    }
    return {
        "seeds": list(seeds),
        "shots": shots,
        "pretrain_train_accuracy": pretrain_accuracy,
        "variants": summary,
        "wall_time_s": time.perf_counter() - started,
    }


def format_table(result: dict[str, Any]) -> str:
    """The accuracy table ``main`` prints."""
    seeds = result["seeds"]
    lines = [
        f"fine-tuning demo: digits 0-4 -> {result['shots']} images per digit 5-9, seeds {seeds}",
        f"{'variant':<10} " + " ".join(f"seed {s:<3}" for s in seeds) + "   mean +- std",
    ]
    for variant, row in result["variants"].items():
        cells = " ".join(f"{a:<8.4f}" for a in row["accuracy"])
        lines.append(f"{variant:<10} {cells}   {row['mean']:.4f} +- {row['std']:.4f}")
    lines.append(f"wall time {result['wall_time_s']:.1f} s on {torch.get_num_threads()} torch thread(s)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lightning-recipes demo --finetune``: prints the table, returns 0."""
    args = build_parser().parse_args(argv)
    check_demo_args(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    quiet = logging.getLogger("lightning.pytorch")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # 12 fits: keep Lightning's per-fit info lines out of the table
    try:
        result = run_finetune_demo(args.seeds, args.shots, args.pretrain_epochs, args.finetune_epochs)
    finally:
        quiet.setLevel(level)
    print(format_table(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
