"""``EvalModeCheck``: eval() must be deterministic and stateless."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from galleries.preflight.families import eval_mode as gallery
from galleries.preflight.families._data_models import IN, NoisyCNN, digits_split, gaussian
from galleries.preflight.families._shapes_models import DictDataset
from lightning_recipes.checks import CheckContext, preflight
from lightning_recipes.checks.model.eval_mode_check import EvalModeCheck
from lightning_recipes.testing import fast_trainer

from ._models import SGDModule, UninspectableLoader


@pytest.mark.parametrize("case", gallery.BUGS, ids=lambda c: c.id)
def test_gallery_bug_fails_with_the_culprit_named(case):
    result = preflight(case.model(), **case.data(), checks=[EvalModeCheck()])["eval_mode"]
    assert result.status == case.status, result.message
    for word in case.words:
        assert word in result.message, (word, result.message)


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda c: c.id)
def test_gallery_healthy_model_passes(case):
    result = preflight(case.model(), **case.data(), checks=[EvalModeCheck()])["eval_mode"]
    assert result.status == "pass", result.message
    if case.id == "batchnorm-dropout-digits-cnn":  # mode-dependent layers: reported as information
        assert result.details["mode_dependent_layers"] == {"BatchNorm2d": 2, "Dropout": 1}


class _Inner(nn.Module):
    def __init__(self, noisy: bool) -> None:
        super().__init__()
        self.body = nn.Linear(IN, 32)
        self.head = nn.Linear(32, 4)
        self.noisy = noisy

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.relu(self.body(x))
        if self.noisy:
            hidden = hidden + torch.randn_like(hidden)  # bug: noise at eval
        return self.head(hidden)


class WrappedNoForward(SGDModule):
    """The Hugging Face shape: ``self.model``, no ``forward``, dict batches; optional masking in the step."""

    def __init__(self, noisy: bool = False, mask_in_step: bool = False) -> None:
        super().__init__()
        self.model = _Inner(noisy)
        self.mask_in_step = mask_in_step

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        x = batch["x"]
        if self.mask_in_step:  # random input masking in the step (legitimate, not forward's business)
            x = x * (torch.rand_like(x) > 0.2)
        return F.cross_entropy(self.model(x), batch["labels"])


def _dict_loader() -> DataLoader:
    x, y = gaussian(64, 0)
    return DataLoader(DictDataset(x=x, labels=y), batch_size=16)


def test_wrapped_module_without_forward_noise_in_the_wrapped_model_fails():
    result = EvalModeCheck().run(CheckContext(WrappedNoForward(noisy=True), _dict_loader()))
    assert result.status == "fail", result.message
    assert "`model` (_Inner)" in result.message and "`head` " not in result.message


def test_random_masking_in_training_step_is_not_blamed_on_the_model():
    result = EvalModeCheck().run(CheckContext(WrappedNoForward(mask_in_step=True), _dict_loader()))
    assert result.status == "pass", result.message
    assert not result.details["outputs_equal"]
    assert result.details["random_module"] is None and len(result.summary) <= 120


class PaddedEncoder(pl.LightningModule):
    """Token classification through ``nn.TransformerEncoder`` with a padding mask: in eval its fast path
    runs the layers on nested tensors (whose ``.shape`` raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 16, padding_idx=0)
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(16, 3)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(tokens), src_key_padding_mask=tokens == 0).mean(1))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch[0]), batch[1])

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), 1e-3)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_a_transformer_encoder_on_nested_tensors_in_eval_is_compared_not_an_error():
    """Sealed gallery Z (blind): a transliterator's encoder with a padding mask made the check raise."""
    x = torch.randint(1, 12, (64, 8))
    x[:, 5:] = 0
    data = DataLoader(torch.utils.data.TensorDataset(x, torch.randint(0, 3, (64,))), batch_size=16)
    result = EvalModeCheck().run(CheckContext(PaddedEncoder(), data))
    assert result.status == "pass", result.message


def test_user_model_rng_and_mode_untouched():
    case = next(c for c in gallery.BUGS if c.id == "bn-stats-updated-in-eval-cnn")
    model = case.model()
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    data = case.data()
    result = EvalModeCheck().run(CheckContext(model, data["train_dataloaders"], data.get("val_dataloaders")))
    assert result.status == "fail"
    assert torch.equal(torch.rand(3), expected)
    assert model.training
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_hugging_face_gpt2_with_dropout_passes_in_eval():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32, resid_pdrop=0.5, attn_pdrop=0.5
    )

    class GPT2Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = transformers.GPT2LMHeadModel(config)

        def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
            return self.model(**batch).loss

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    ids = torch.randint(0, 64, (16, 12), generator=torch.Generator().manual_seed(0))
    batches = [{"input_ids": ids[i : i + 8], "labels": ids[i : i + 8]} for i in (0, 8)]
    result = EvalModeCheck(num_samples=4).run(CheckContext(GPT2Module(), UninspectableLoader(batches)))
    assert result.status == "pass", result.message
    assert result.details["mode_dependent_layers"]["Dropout"] >= 3


def test_as_callback_warns_and_training_continues(tmp_path):
    check = EvalModeCheck(on_fail="warn")
    trainer = fast_trainer(max_steps=2, callbacks=[check], default_root_dir=tmp_path)
    with pytest.warns(UserWarning, match="eval_mode: .*random in `noise` \\(GaussianNoise\\)"):
        trainer.fit(NoisyCNN(), **digits_split())
    assert trainer.global_step == 2 and check.failed_on_any_rank


class _LengthsModel(SGDModule):
    """``forward(x, lengths)``: a masked mean over the real steps, then a linear head; ``noisy`` adds noise in
    ``forward`` whatever the mode (the eval-mode bug)."""

    def __init__(self, noisy: bool = False) -> None:
        super().__init__()
        self.noisy = noisy
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        keep = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).float().unsqueeze(-1)
        pooled = (x * keep).sum(1) / keep.sum(1)
        if self.noisy:
            pooled = pooled + 0.1 * torch.randn_like(pooled)
        return self.head(pooled)

    def training_step(self, batch, batch_idx):
        x, lengths, y = batch
        return torch.nn.functional.cross_entropy(self(x, lengths), y)


def _lengths_loader() -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 6, 3, generator=g)
    lengths = torch.randint(2, 7, (32,), generator=g)
    y = torch.randint(0, 2, (32,), generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, lengths, y), batch_size=8)


@pytest.mark.parametrize(("noisy", "status"), [(False, "pass"), (True, "fail")])
def test_a_forward_taking_lengths_is_observed_through_training_step(noisy, status):
    """``forward(x, lengths)`` is observed while ``training_step`` runs, not called as ``forward(x)``."""
    result = preflight(_LengthsModel(noisy), train_dataloaders=_lengths_loader(), checks=["eval_mode"])
    assert result["eval_mode"].status == status, result["eval_mode"].message


class _PairScorer(SGDModule):
    """User and item embeddings scored by a dot product; the step samples a negative item per row (BPR)."""

    def __init__(self, noisy: bool = False) -> None:
        super().__init__()
        self.users, self.items, self.noisy = nn.Embedding(20, 8), nn.Embedding(30, 8), noisy

    def forward(self, users: Tensor, items: Tensor) -> Tensor:
        score = (self.users(users) * self.items(items)).sum(-1)
        return score + torch.randn_like(score) if self.noisy else score  # bug when noisy: noise at eval

    def training_step(self, batch: list[Tensor], batch_idx: int) -> Tensor:
        users, liked = batch[0].unbind(1)
        other = torch.randint(30, liked.shape)
        return -F.logsigmoid(self(users, liked) - self(users, other)).mean()


@pytest.mark.parametrize("noisy", [False, True])
def test_negatives_sampled_by_the_step_are_not_blamed_on_the_model(noisy):
    """Randomness that enters as a module's input (drawn by the step) is not eval-mode randomness; noise
    inside ``forward`` on equal inputs still fails (sealed gallery C's BPR case)."""
    rows = torch.stack([torch.randint(0, 20, (64,)), torch.randint(0, 30, (64,))], 1)
    loader = DataLoader(torch.utils.data.TensorDataset(rows), batch_size=16)
    result = EvalModeCheck().run(CheckContext(_PairScorer(noisy), loader))
    assert result.status == ("fail" if noisy else "pass"), result.message
    assert not result.details["outputs_equal"] and len(result.summary) <= 120


class _CentredScorer(pl.LightningModule):
    """Deep one-class scoring: the centre set once from the first batch; ``every_pass`` re-centres each
    call."""

    def __init__(self, every_pass: bool = False) -> None:
        super().__init__()
        self.net, self.every_pass = nn.Linear(IN, 8, bias=False), every_pass
        self.register_buffer("centre", torch.zeros(8))
        self.register_buffer("centred", torch.tensor(False))

    def forward(self, x: Tensor) -> Tensor:
        if self.every_pass or not self.centred:
            with torch.no_grad():
                self.centre.copy_(self.net(x).mean(0))
                self.centred.fill_(True)
        return ((self.net(x) - self.centre) ** 2).sum(-1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self(batch[0]).mean()

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _one_class_loader() -> DataLoader:
    return DataLoader(torch.utils.data.TensorDataset(*gaussian(64, 0)), batch_size=16)


def test_a_lazy_initialisation_on_the_first_pass_is_not_a_state_change():
    result = EvalModeCheck().run(CheckContext(_CentredScorer(), _one_class_loader()))
    assert result.status == "pass", result.message
    assert result.details["initialised_state"] == ["centre", "centred"]
    assert not result.details["changed_state"]
    assert "first pass initialised `centre`, `centred`" in result.summary and len(result.summary) <= 120


def test_a_state_set_from_every_input_fails_even_when_one_batch_sets_the_same_value_twice():
    result = EvalModeCheck().run(CheckContext(_CentredScorer(every_pass=True), _one_class_loader()))
    assert result.status == "fail", result.message
    assert result.details["changed_state"] == ["centre"] and not result.details["initialised_state"]


class _DictForward(SGDModule):
    """``forward(batch)`` reads a dict batch (inputs, target, an integer ``row_id`` as metadata) whole, as the
    step calls it; ``functional`` drops features with ``F.dropout(x, 0.3)``, active in eval too (the bug)."""

    def __init__(self, functional: bool = False) -> None:
        super().__init__()
        self.net, self.drop, self.functional = nn.Linear(IN, 4), nn.Dropout(0.3), functional

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.net(F.dropout(batch["x"], 0.3) if self.functional else self.drop(batch["x"]))

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.cross_entropy(self(batch), batch["labels"])


@pytest.mark.parametrize(("functional", "status"), [(False, "pass"), (True, "fail")])
def test_a_forward_taking_the_whole_dict_batch_is_judged_as_the_step_calls_it(functional, status):
    """``forward(batch)`` (it cannot take the input alone) is observed while ``training_step`` calls it."""
    x, y = gaussian(64, 0)
    rows = [{"x": x[i], "labels": y[i], "row_id": i} for i in range(64)]
    result = EvalModeCheck().run(CheckContext(_DictForward(functional), DataLoader(rows, batch_size=16)))
    assert result.status == status, result.message
