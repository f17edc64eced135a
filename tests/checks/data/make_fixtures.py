"""Writes ``preflight_report.json`` and ``check_callbacks.ckpt``, the fixtures of tests/checks/test_compat.py.

Run from the repository root: ``PYTHONPATH=. python tests/checks/data/make_fixtures.py``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def fixture_inputs() -> tuple[torch.nn.Module, torch.utils.data.DataLoader]:
    from torch.utils.data import DataLoader, TensorDataset

    from lightning_recipes.testing import TinyClassifier

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(128, 16, generator=generator)
    y = (x[:, :4].argmax(dim=1)).long()  # labels that depend on the inputs: every check can pass
    loader = DataLoader(
        TensorDataset(x, y), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    torch.manual_seed(0)
    return TinyClassifier(in_features=16, num_classes=4, lr=0.5), loader


def normalised(report_dict: dict) -> dict:
    """Durations vary from run to run; everything else is deterministic."""
    data = json.loads(json.dumps(report_dict))
    data["seconds"] = 0.0
    for result in data["results"]:
        result["seconds"] = 0.0
    if "slowest" in data:  # named from the durations: what a report with every duration at 0 names
        data["slowest"] = data["results"][0]["name"] if data["results"] else None
    return data


def main() -> None:
    from lightning_recipes import InitLossCheck, Preflight, preflight
    from lightning_recipes.testing import fast_trainer

    torch.set_num_threads(1)
    model, loader = fixture_inputs()
    report = preflight(model, train_dataloaders=loader, num_threads=1)
    (HERE / "preflight_report.json").write_text(json.dumps(normalised(report.to_dict()), indent=1) + "\n")

    model, loader = fixture_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = fast_trainer(
            max_steps=1,
            callbacks=[InitLossCheck(), Preflight(checks=["init_loss", "grad_flow"], print_report=False)],
            default_root_dir=tmp,
        )
        trainer.fit(model, loader)
        trainer.save_checkpoint(HERE / "check_callbacks.ckpt")


if __name__ == "__main__":
    main()
