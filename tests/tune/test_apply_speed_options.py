"""Applying speed_tune's choice (issue 22.2): the callback, the function, the loader, LightningCLI YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from lightning_recipes.data import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import ApplySpeedOptions, SpeedTuneResult, apply_speed_options, speed_loader


def _channels_last(model: torch.nn.Module) -> bool:
    return all(
        m.weight.is_contiguous(memory_format=torch.channels_last)
        for m in model.modules()
        if isinstance(m, torch.nn.Conv2d)
    )


def test_the_callback_applies_the_module_options_inside_fit() -> None:
    model = DigitsCNN(width=4)
    callback = ApplySpeedOptions(["fused_optimizer", "channels_last"])
    trainer = fast_trainer(max_steps=2, callbacks=[callback])
    trainer.fit(model, datamodule=DigitsDataModule())
    assert _channels_last(model)
    optimizer = trainer.optimizers[0]
    assert type(optimizer) is torch.optim.AdamW and optimizer.param_groups[0]["fused"] is True
    trainer.fit(model, datamodule=DigitsDataModule(), ckpt_path=None)  # a second fit: applied once, no error


def test_apply_speed_options_compiles_in_place_and_checks_names() -> None:
    model = TinyClassifier()
    assert apply_speed_options(model, ["compile"]) is model
    assert model._compiled_call_impl is not None  # nn.Module.compile's own flag: the calls run compiled
    with pytest.raises(ValueError, match="`options`"):
        apply_speed_options(TinyClassifier(), ["turbo"])
    with pytest.raises(ValueError, match="`options`"):
        ApplySpeedOptions(["turbo"])
    with pytest.raises(TypeError, match="`options`"):
        ApplySpeedOptions("compile")  # type: ignore[arg-type]


def test_the_callback_warns_when_the_loader_or_precision_lack_the_choice() -> None:
    trainer = fast_trainer(max_steps=1, callbacks=[ApplySpeedOptions(["num_workers", "bf16-mixed"])])
    expected = r"precision='bf16-mixed'\) \(the Trainer has '32-true'\); num_workers=2 \(the loader has 0\)"
    with pytest.warns(UserWarning, match=expected):
        trainer.fit(TinyClassifier(), random_classification_loader())


def test_speed_loader_keeps_the_batches_and_adds_the_workers() -> None:
    loader = random_classification_loader()
    rebuilt = speed_loader(loader, ["num_workers"])
    assert (rebuilt.num_workers, rebuilt.persistent_workers) == (2, True)
    assert rebuilt.dataset is loader.dataset and len(rebuilt) == len(loader)
    assert speed_loader(loader, ["channels_last"]) is loader


def test_a_speed_tune_result_applies_through_trainer_kwargs_callback_and_loader() -> None:
    result = SpeedTuneResult([], ["fused_optimizer"], module_options=["fused_optimizer"])
    trainer = fast_trainer(max_steps=1, callbacks=[result.callback()], **result.trainer_kwargs)
    trainer.fit(TinyClassifier(), result.loader(random_classification_loader()))
    assert trainer.optimizers[0].param_groups[0]["fused"] is True


def test_the_yaml_fragment_configures_lightningcli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22.2: `.to_yaml()` now holds the model-side callback too, and LightningCLI builds it."""
    from lightning.pytorch.cli import LightningCLI

    advice = {"channels_last": "model.to(memory_format=torch.channels_last)"}
    loader_kwargs = {"num_workers": 2, "persistent_workers": True}
    result = SpeedTuneResult([], ["channels_last", "bf16-mixed", "num_workers"], advice=advice,
                             trainer_kwargs={"precision": "bf16-mixed"}, loader_kwargs=loader_kwargs,
                             module_options=["channels_last"])  # fmt: skip
    fragment = result.to_yaml()
    assert "# the training DataLoader (your datamodule's arguments): num_workers=2" in fragment
    config = yaml.safe_load(fragment)
    assert config == result.cli_config()
    config["model"] = {"class_path": "lightning_recipes.testing.DigitsCNN", "init_args": {"width": 4}}
    config["data"] = {"class_path": "lightning_recipes.data.DigitsDataModule"}
    config["trainer"].update(
        max_steps=1, logger=False, enable_checkpointing=False, default_root_dir=str(tmp_path)
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setattr("sys.argv", ["train.py"])
    cli = LightningCLI(args=["--config", str(path)], run=False, save_config_callback=None)
    assert cli.trainer.precision == "bf16-mixed"
    applied = [c for c in cli.trainer.callbacks if isinstance(c, ApplySpeedOptions)]
    assert len(applied) == 1 and applied[0].options == ["channels_last"]
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert _channels_last(cli.model)
