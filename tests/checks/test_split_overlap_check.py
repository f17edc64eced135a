"""``SplitOverlapCheck``: validation samples repeating training samples, exact or near."""

from __future__ import annotations

import math

import pytest
import torch
from lightning.pytorch import Callback
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families import split_overlap as gallery
from galleries.preflight.families._data_models import MLP, digits_split, gaussian, loaders
from galleries.preflight.families._shapes_models import DictDataset
from lightning_recipes.checks import CheckContext, DataCheck, Preflight, PreflightError, preflight
from lightning_recipes.checks.data.split_overlap_check import (
    SplitOverlapCheck,
    _best_match,
    _fingerprint,
    _token_similarity,
)
from lightning_recipes.checks.model.eval_mode_check import EvalModeCheck
from lightning_recipes.data import CharLMDataModule
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM, fast_trainer


@pytest.mark.parametrize("case", gallery.BUGS, ids=lambda c: c.id)
def test_gallery_bug_fails(case):
    result = preflight(case.model(), **case.data(), checks=[SplitOverlapCheck()])["split_overlap"]
    assert result.status == case.status, result.message
    assert len(result.summary) <= 120 and result.action and result.details["measured"] >= 0.1


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda c: c.id)
def test_gallery_healthy_split_passes(case):
    result = preflight(case.model(), **case.data(), checks=[SplitOverlapCheck()])["split_overlap"]
    assert result.status == "pass", result.message
    if (
        case.id == "low-diversity-tokens-lm"
    ):  # most validation sequences match, as often as training's: chance
        assert result.details["val_near"] > 0.5 * result.details["val_samples"]
        assert result.details["chance_rate"] > 0.5 and result.details["estimated_overlap"] < 0.1


def test_skips_without_validation_loader_and_says_what_to_pass():
    result = SplitOverlapCheck().run(CheckContext(MLP(), loaders(*gaussian(64, 0))["train_dataloaders"]))
    assert result.status == "skip"
    assert "no validation loader" in result.message and "val_dataloaders=" in result.message


def test_the_training_loader_passed_as_validation_fails_without_reading():
    train = loaders(*gaussian(64, 0))["train_dataloaders"]
    result = SplitOverlapCheck().run(CheckContext(MLP(), train, train))
    assert result.status == "fail"
    assert result.details["shared_dataset"] is True
    assert result.details["estimated_overlap"] == 1.0


def test_overlap_extrapolated_from_the_fraction_of_training_data_read():
    """4096 training samples, 512 read (1/8): a validation set drawn from the training set matches about
    1/8 of the time, which extrapolates to (nearly) all of it."""
    x, y = gaussian(4096, 0)
    pick = torch.randperm(4096, generator=torch.Generator().manual_seed(1))[:256]
    data = loaders(x, y, x[pick], y[pick], batch_size=32)
    context = CheckContext(MLP(), data["train_dataloaders"], data["val_dataloaders"])
    result = SplitOverlapCheck(num_batches=16).run(context)
    assert result.status == "fail", result.message
    assert result.details["train_samples"] == 512 and result.details["train_dataset_size"] == 4096
    matched = result.details["val_exact"]
    assert 16 <= matched <= 48  # about 256 / 8 = 32
    assert result.details["estimated_overlap"] == pytest.approx(min(1.0, matched / 256 * 8))


def test_a_few_shared_samples_warn():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    x_val[:6], y_val[:6] = x[:6], y[:6]  # 6 of 256 validation samples (2.3%) also in training
    data = loaders(x, y, x_val, y_val)
    result = SplitOverlapCheck(num_batches=16).run(
        CheckContext(MLP(), data["train_dataloaders"], data["val_dataloaders"])
    )
    assert result.status == "warn", result.message
    assert result.details["val_exact"] == 6
    assert result.action


def test_blank_samples_are_not_overlap():
    x, y = gaussian(256, 0)
    x_val, y_val = gaussian(128, 1)
    x[:20] = 0.0
    x_val[:20] = 0.0
    data = loaders(x, y, x_val, y_val)
    result = SplitOverlapCheck().run(CheckContext(MLP(), data["train_dataloaders"], data["val_dataloaders"]))
    assert result.status == "pass", result.message
    assert result.details["val_exact"] == 0


def test_cosine_of_centred_samples_matches_the_formula():
    """The vectorised near-duplicate search against cos(a - mean(a), b - mean(b)) pair by pair."""
    g = torch.Generator().manual_seed(0)
    queries, keys = torch.randn(10, 1, 4, 5, generator=g), torch.randn(12, 1, 4, 5, generator=g)
    queries[3] = 2.0 * keys[7] + 0.5  # brightness and contrast change: cosine exactly 1
    best, where = _best_match(
        _fingerprint(queries), _fingerprint(keys), lambda a, b: a @ b.T, exclude_self=False
    )
    for i in range(10):
        a = queries[i].flatten().tolist()
        sims = []
        for j in range(12):
            b = keys[j].flatten().tolist()
            ma, mb = sum(a) / len(a), sum(b) / len(b)
            dot = sum((p - ma) * (q - mb) for p, q in zip(a, b, strict=True))
            na = math.sqrt(sum((p - ma) ** 2 for p in a))
            nb = math.sqrt(sum((q - mb) ** 2 for q in b))
            sims.append(dot / (na * nb))
        assert best[i].item() == pytest.approx(max(sims), abs=1e-5)
        assert int(where[i]) == sims.index(max(sims))
    assert best[3].item() == pytest.approx(1.0, abs=1e-6) and int(where[3]) == 7


def test_token_near_duplicates_by_fraction_of_equal_positions():
    train = torch.arange(64).reshape(4, 16)
    one_changed, two_changed = train[1].clone(), train[2].clone()
    one_changed[0] = 999  # 15/16 = 93.75% equal
    two_changed[:2] = 999  # 14/16 = 87.5% equal
    best, where = _best_match(
        torch.stack([one_changed, two_changed]), train, _token_similarity, exclude_self=False
    )
    assert best.tolist() == [15 / 16, 14 / 16] and where.tolist() == [1, 2]
    x_val = torch.stack([one_changed, two_changed] * 4)
    y = torch.zeros(len(train), dtype=torch.long)
    train_loader = DataLoader(TensorDataset(train, y), batch_size=4)
    val_loader = DataLoader(TensorDataset(x_val, torch.zeros(8, dtype=torch.long)), batch_size=8)
    result = SplitOverlapCheck().run(CheckContext(MLP(), train_loader, val_loader))
    assert result.details["val_near"] == 4  # the four one-token edits


def _overlapping_digits() -> dict:
    return next(c for c in gallery.BUGS if c.id == "digits-val-subset-of-train").data()


def test_as_callback_in_a_real_trainer_stops_before_training(tmp_path):
    check = SplitOverlapCheck()
    trainer = fast_trainer(max_steps=2, callbacks=[check], default_root_dir=tmp_path)
    with pytest.raises(PreflightError, match="split_overlap"):
        trainer.fit(DigitsCNN(width=4), **_overlapping_digits())
    assert trainer.global_step == 0
    assert check.result is not None and check.result.details["val_exact"] > 100


def test_ddp_every_rank_reads_its_shard_and_all_raise(tmp_path):
    check = SplitOverlapCheck()
    trainer = fast_trainer(
        max_steps=1, strategy="ddp_fork", devices=2, callbacks=[check], default_root_dir=tmp_path
    )
    with pytest.raises(Exception, match="split_overlap"):
        trainer.fit(DigitsCNN(width=4), **_overlapping_digits())


class RecordStatuses(Callback):
    """Writes each rank's statuses after training (the workers' results do not reach the test process)."""

    def __init__(self, flight: Preflight, directory: str) -> None:
        self.flight, self.directory = flight, directory

    def on_train_end(self, trainer, pl_module) -> None:
        assert self.flight.report is not None
        statuses = " ".join(f"{r.name}={r.status}" for r in self.flight.report)
        with open(f"{self.directory}/rank{trainer.global_rank}.txt", "w") as handle:
            handle.write(f"{statuses} step={trainer.global_step}")


def test_ddp_healthy_split_trains_with_the_new_checks(tmp_path):
    flight = Preflight(checks=[DataCheck(), SplitOverlapCheck(), EvalModeCheck()], print_report=False)
    callbacks = [flight, RecordStatuses(flight, str(tmp_path))]
    trainer = fast_trainer(
        max_steps=2, strategy="ddp_fork", devices=2, callbacks=callbacks, default_root_dir=tmp_path
    )
    trainer.fit(DigitsCNN(width=4), **digits_split())
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    expected = "data=pass split_overlap=pass eval_mode=pass step=2"
    assert outcomes == {"rank0.txt": expected, "rank1.txt": expected}


def _dict_tokens(ids: torch.Tensor, labels: torch.Tensor) -> DataLoader:
    """Hugging Face-style samples: ``input_ids``, ``attention_mask``, ``labels``."""
    return DataLoader(DictDataset(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels), 32)


def test_dict_batches_compare_the_input_ids():
    ids = torch.randint(0, 1000, (256, 24), generator=torch.Generator().manual_seed(0))
    labels = torch.randint(0, 2, (256,), generator=torch.Generator().manual_seed(1))
    train = _dict_tokens(ids, labels)
    leaked = _dict_tokens(ids[:64].clone(), labels[:64])
    fresh = _dict_tokens(ids.flip(0)[:64] + 1000, labels[:64])
    result = SplitOverlapCheck().run(CheckContext(MLP(), train, leaked))
    assert result.status == "fail" and result.details["val_exact"] == 64
    assert "equal tokens" in result.details["near_method"]
    assert SplitOverlapCheck().run(CheckContext(MLP(), train, fresh)).status == "pass"


def test_one_feature_samples_are_compared_not_skipped_as_blank():
    x = torch.randn(128, 1, generator=torch.Generator().manual_seed(0))
    y = 2 * x.squeeze(1)
    data = loaders(x, y, x[:32].clone(), y[:32])
    result = SplitOverlapCheck().run(CheckContext(MLP(), data["train_dataloaders"], data["val_dataloaders"]))
    assert result.status == "fail" and result.details["val_exact"] == 32


def test_text_that_repeats_itself_across_the_splits_warns_but_does_not_fail():
    """The char LM's boilerplate windows nearly repeat across the splits: a warning, not a fail."""
    model = TinyTransformerLM(vocab_size=CharLMDataModule(max_chars=1).vocab_size, d_model=16, n_layers=1)
    datamodule = CharLMDataModule(seq_len=64, batch_size=32)
    result = preflight(model, datamodule=datamodule, checks=["split_overlap"], progress=False)[0]
    assert result.status in ("pass", "warn"), result.message
    if result.status == "warn":
        assert result.details["val_exact"] == 0


def test_one_value_samples_that_repeat_within_training_are_chance_not_overlap():
    """A category code or a target encoding per row (sealed gallery C): training repeats itself as often
    as validation repeats training, so equal values are chance; a copied continuous value still fails."""
    g = torch.Generator().manual_seed(0)
    codes, val_codes = torch.randint(0, 40, (512,), generator=g), torch.randint(0, 40, (256,), generator=g)
    data = loaders(codes.float()[:, None], codes % 4, val_codes.float()[:, None], val_codes % 4)
    result = SplitOverlapCheck().run(CheckContext(MLP(1), data["train_dataloaders"], data["val_dataloaders"]))
    assert result.status == "pass", result.message
    assert result.details["val_exact"] == 256 and result.details["chance_rate"] > 0.9


def test_rows_copied_entry_for_entry_fail_where_the_ids_alone_repeat_by_chance():
    """(user, item, rating) rows: ids repeat across any two splits, a whole row with its noisy rating only
    when validation rows were also trained on (sealed gallery G); the same id pairs rated again pass."""
    g = torch.Generator().manual_seed(0)
    user, item = torch.randint(0, 30, (1024,), generator=g), torch.randint(0, 20, (1024,), generator=g)
    rating = torch.randn(1024, generator=g)
    train = DataLoader(TensorDataset(user, item, rating), batch_size=64)
    copied = DataLoader(TensorDataset(user[:256], item[:256], rating[:256].clone()), batch_size=64)
    rerated = DataLoader(TensorDataset(user[:256], item[:256], torch.randn(256, generator=g)), batch_size=64)
    result = SplitOverlapCheck().run(CheckContext(MLP(1), train, copied))
    assert result.status == "fail" and result.details["val_rows_copied"] == 256, result.message
    assert "entry for entry" in result.summary and len(result.summary) <= 120
    passed = SplitOverlapCheck().run(CheckContext(MLP(1), train, rerated))
    assert passed.status == "pass" and passed.details["val_rows_copied"] == 0, passed.message
