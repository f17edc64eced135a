"""BatchMixingMixin in a real Trainer: training batches mixed, every other loop untouched, exact resume, the
rank behaviour under DDP, LightningCLI YAML, the preflight."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import Tensor

from lightning_recipes.losses import mixed_cross_entropy
from lightning_recipes.mixing import BatchMixer, BatchMixingMixin
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


class MixedClassifier(BatchMixingMixin, TinyClassifier):
    def __init__(self, batch_mixer: BatchMixer | None = None, label_smoothing: float = 0.1) -> None:
        super().__init__(in_features=16, num_classes=4)
        self.batch_mixer = batch_mixer
        self.label_smoothing = label_smoothing
        self.seen: dict[str, list[tuple[int, Tensor, Tensor]]] = {}
        self.draws: list[tuple[int, float, Tensor]] = []

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return mixed_cross_entropy(logits, target, label_smoothing=self.label_smoothing)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def _record(self, stage: str, batch: Any, batch_idx: int) -> None:
        self.seen.setdefault(stage, []).append((batch_idx, batch[0].clone(), batch[1].clone()))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        self._record("train", batch, batch_idx)
        draw = self.batch_mixer.last_draw if self.batch_mixer is not None else None
        if draw is not None:
            self.draws.append((draw.index, draw.lam, draw.permutation.clone()))
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._record("sanity" if self.trainer.sanity_checking else "val", batch, batch_idx)
        super().validation_step(batch, batch_idx)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._record("test", batch, batch_idx)

    def predict_step(self, batch: Any, batch_idx: int) -> Tensor:
        self._record("predict", batch, batch_idx)
        return self(batch[0])


class RankCheckedClassifier(MixedClassifier):
    """In the workers: independent draws differ between the ranks; a synced mixer draws the same on both."""

    def on_train_end(self) -> None:
        assert self.batch_mixer is not None and self.batch_mixer.rank == self.global_rank
        lams = torch.tensor([lam for _, lam, _ in self.draws], dtype=torch.float64)
        perms = torch.stack([perm for _, _, perm in self.draws])
        all_lams, all_perms = self.all_gather(lams), self.all_gather(perms)
        assert all_lams.shape == (2, 2), all_lams
        assert not torch.equal(all_lams[0], all_lams[1]) and not torch.equal(all_perms[0], all_perms[1])
        synced = BatchMixer(mixup_alpha=1.0, sync_across_ranks=True)
        synced.rank = self.global_rank
        draws = [synced.draw(16) for _ in range(2)]
        all_synced = self.all_gather(torch.tensor([d.lam for d in draws], dtype=torch.float64))
        all_perms = self.all_gather(torch.stack([d.permutation for d in draws]))
        assert torch.equal(all_synced[0], all_synced[1]) and torch.equal(all_perms[0], all_perms[1])


def _loader() -> torch.utils.data.DataLoader:
    return random_classification_loader(num_samples=64, batch_size=16)


def test_training_batches_mixed_all_other_loops_untouched(tmp_path: Path) -> None:
    loader = _loader()
    raw = list(loader)
    model = MixedClassifier(BatchMixer(mixup_alpha=0.4, num_classes=4))
    validation = {"num_sanity_val_steps": 1, "limit_val_batches": 2}
    trainer = fast_trainer(max_epochs=1, default_root_dir=tmp_path, **validation)
    trainer.fit(model, loader, loader)
    trainer.validate(model, loader, verbose=False)
    trainer.test(model, loader, verbose=False)
    trainer.predict(model, loader)
    assert model.batch_mixer is not None and model.batch_mixer.num_batches == 4  # training batches only
    for i, x, y in model.seen["train"]:
        x_raw = raw[i][0]
        assert y.dtype == torch.float32 and y.shape == (16, 4) and not torch.equal(x, x_raw)
    for stage in ("sanity", "val", "test", "predict"):
        assert model.seen[stage], stage
        for i, x, y in model.seen[stage]:
            x_raw, y_raw = raw[i]
            assert torch.equal(x, x_raw) and torch.equal(y, y_raw), stage


def test_resume_continues_the_same_mixing_stream_bitwise(tmp_path: Path) -> None:
    def run(ckpt_path: str | None = None, callbacks: list | None = None) -> MixedClassifier:
        torch.manual_seed(0)
        model = MixedClassifier(BatchMixer(mixup_alpha=1.0, cutmix_alpha=0.0, num_classes=4, seed=3))
        settings = {"max_steps": 6, "max_epochs": 2, "default_root_dir": tmp_path}
        trainer = fast_trainer(callbacks=callbacks or [], enable_checkpointing=bool(callbacks), **settings)
        trainer.fit(model, _loader(), ckpt_path=ckpt_path)
        return model

    # at an epoch's end: Lightning re-reads a plain loader from its start when resumed mid-epoch
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    full = run(callbacks=[checkpoint])
    resumed = run(ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=4.ckpt"))
    assert [d[0] for d in resumed.draws] == [4, 5]
    for (i, lam, perm), (j, lam_r, perm_r) in zip(full.draws[4:], resumed.draws):
        assert (i, lam) == (j, lam_r) and torch.equal(perm, perm_r)
    for p, q in zip(full.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    saved = torch.load(tmp_path / "ckpt" / "epoch=0-step=4.ckpt", weights_only=True)
    assert saved["batch_mixer"]["num_batches"] == 4
    assert not any("batch_mixer" in key for key in saved["state_dict"])


def test_ddp_ranks_independent_by_default_identical_when_synced(tmp_path: Path) -> None:
    model = pickle.loads(pickle.dumps(RankCheckedClassifier(BatchMixer(mixup_alpha=1.0, num_classes=4))))
    trainer = fast_trainer(strategy="ddp_fork", devices=2, max_steps=2, default_root_dir=tmp_path)
    trainer.fit(model, _loader())  # the assertions run in the workers; a failure fails the fit


def test_lightning_cli_yaml_builds_the_mixer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lightning.pytorch.cli import LightningCLI

    monkeypatch.setattr("sys.argv", ["train.py"])
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  label_smoothing: 0.2\n"
        "  batch_mixer:\n"
        "    class_path: lightning_recipes.mixing.BatchMixer\n"
        "    init_args: {mixup_alpha: 0.4, cutmix_alpha: 0.0, prob: 0.9, num_classes: 4, seed: 7,\n"
        "                sync_across_ranks: true}\n"
        "trainer: {accelerator: cpu, max_steps: 2, logger: false, enable_checkpointing: false,\n"
        f"          enable_progress_bar: false, enable_model_summary: false, default_root_dir: {tmp_path}}}\n"
    )
    cli = LightningCLI(MixedClassifier, args=["--config", str(config)], run=False, save_config_callback=None)
    mixer = cli.model.batch_mixer
    assert isinstance(mixer, BatchMixer)
    settings = (mixer.mixup_alpha, mixer.prob, mixer.num_classes, mixer.seed, mixer.sync_across_ranks)
    assert settings == (0.4, 0.9, 4, 7, True)
    cli.trainer.fit(cli.model, _loader())
    assert mixer.num_batches == 2


class _DataModuleWithOwnHook(pl.LightningDataModule):
    def train_dataloader(self) -> Any:
        return _loader()

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch


def test_datamodule_hook_that_would_bypass_the_mixer_is_refused() -> None:
    model = MixedClassifier(BatchMixer(mixup_alpha=0.4, num_classes=4))
    with pytest.raises(RuntimeError, match="overrides `on_after_batch_transfer`"):
        fast_trainer(max_steps=1).fit(model, datamodule=_DataModuleWithOwnHook())


def test_preflight_sees_unmixed_batches_and_does_not_advance_the_stream() -> None:
    from lightning_recipes import Preflight

    model = MixedClassifier(BatchMixer(mixup_alpha=1.0, num_classes=4), label_smoothing=0.0)
    preflight = Preflight(checks=["data", "init_loss"], on_fail="raise", print_report=False, num_classes=4)
    fast_trainer(max_steps=2, callbacks=[preflight]).fit(model, _loader())
    assert preflight.report is not None and not preflight.report.failures
    assert model.batch_mixer is not None and model.batch_mixer.num_batches == 2
