"""init_loss knows the loss it reads; a loss whose value at init it does not know is skipped, never failed."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from galleries.preflight.families import _existing_models as M
from galleries.preflight.families.init_loss import BUGS
from lightning_recipes.checks import CheckContext, InitLossCheck, preflight
from lightning_recipes.checks.loss._expected_loss import (
    ce_floor,
    expected_initial_loss,
    is_prior_output,
    record_loss_calls,
)
from lightning_recipes.checks.report import SUMMARY_LIMIT

from . import _models
from ._models import AdamModule


@pytest.mark.parametrize("case", BUGS, ids=[c.id for c in BUGS])
def test_init_loss_gallery_bug_is_flagged(case):
    result = preflight(case.model(), **case.data(), checks=[InitLossCheck()])[case.check]
    assert result.status == case.status, result.message
    assert len(result.summary) <= SUMMARY_LIMIT and result.action
    assert result.details["ratio"] > 2  # every bug of the family is a loss far above its expectation
    if "summed instead of averaged" in case.words:
        assert result.details["summed_over"] > 2


def _zero_head(model, head):
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    return model


@pytest.mark.parametrize(
    ("model", "data", "expected", "classes"),
    [
        (M.BinaryBCE, M.binary_data, math.log(2), None),
        (M.MultiLabel, M.multilabel_data, math.log(2), None),  # ln 2 per output
        (lambda: M.TinySegmenter(classes=3), M.segmentation_data, math.log(3), 3),  # the channel dim
    ],
    ids=["bce_with_logits", "multi_label", "per_pixel_ce"],
)
def test_a_zero_head_scores_exactly_what_its_loss_expects(model, data, expected, classes):
    module = model()
    _zero_head(module, module.net[-1])
    result = preflight(module, **data(), checks=[InitLossCheck()])["init_loss"]
    assert result.status == "pass", result.message
    assert result.details["expected"] == pytest.approx(expected, rel=1e-12)
    assert result.details["measured"] == pytest.approx(expected, rel=1e-6)
    assert result.details.get("num_classes") == classes or classes is None
    if model is M.BinaryBCE:
        assert "binary_cross_entropy_with_logits" in result.details["expected_from"]


def test_prior_initialised_bce_bias_on_1_to_9_data_passes_at_the_prior_entropy():
    data = M.binary_data(0.1)
    result = preflight(M.PriorBiasBCE(0.1), **data, checks=[InitLossCheck()])["init_loss"]
    assert result.status == "pass", result.message
    assert "label prior" in result.details["expected_from"] and "prior_entropy" in result.details
    # reference: the mean binary entropy of the positive rate of the two batches the check read
    batches = [b for _, b in zip(range(2), data["train_dataloaders"])]
    rate = torch.cat([y for _, y in batches]).double().mean()
    entropy = float(-(rate * rate.log() + (1 - rate) * (1 - rate).log()))
    assert result.details["expected"] == pytest.approx(entropy, rel=1e-9)
    assert 0.8 < result.details["ratio"] < 1.2


@pytest.mark.parametrize("prior", [(0.9, 0.1), (0.7, 0.2, 0.1)])
def test_prior_initialised_softmax_bias_passes_at_the_prior_entropy(prior):
    data = M.imbalanced_data(prior)
    result = preflight(M.PriorBiasClassifier(prior), **data, checks=[InitLossCheck()])["init_loss"]
    assert result.status == "pass", result.message
    assert "label prior" in result.details["expected_from"]
    labels = torch.cat([y for _, (_, y) in zip(range(2), data["train_dataloaders"])])
    prior = torch.bincount(labels, minlength=len(prior)).double() / len(labels)
    entropy = float(-(prior * prior.log()).sum())
    assert result.details["expected"] == pytest.approx(entropy, rel=1e-9)


def test_a_bias_far_from_the_prior_is_still_judged_against_uniform():
    """Only a bias that *matches* the label frequencies changes the expectation: the wrong sign is judged
    against ln 2, and warned (the loss is right at uniform logits: the excess is the head's)."""
    result = preflight(M.WrongPriorBias(), **M.binary_data(0.1), checks=[InitLossCheck()])["init_loss"]
    assert result.status == "warn" and result.details["expected"] == pytest.approx(math.log(2))
    assert result.details["at_uniform_prediction"] == pytest.approx(math.log(2), rel=1e-5)


def test_label_smoothing_keeps_ln_c_and_states_the_floor():
    class Smoothed(M.MLPClassifier):
        def loss(self, output, target):
            return F.cross_entropy(output, target, label_smoothing=0.1)

    model = Smoothed(classes=10)
    _zero_head(model, model.net[-1])
    result = preflight(model, **M.classification_data(10), checks=[InitLossCheck()])["init_loss"]
    assert result.status == "pass", result.message
    assert result.details["expected"] == pytest.approx(math.log(10), rel=1e-12)
    # floor = entropy of the smoothed target: 1 - 0.1 + 0.01 on the label, 0.01 on each of the 9 others
    reference = -(0.91 * math.log(0.91) + 9 * 0.01 * math.log(0.01))
    assert result.details["floor"] == pytest.approx(reference, rel=1e-12)
    assert result.details["label_smoothing"] == 0.1


def test_lightning_style_autoencoder_skips_with_reason_instead_of_failing():
    """The integer label of the ``(x, label)`` batch does not make the 64 outputs 64-class logits."""
    result = preflight(M.LitAutoEncoder(), **M.reconstruction_data(), checks=[InitLossCheck()])["init_loss"]
    assert result.status == "skip", result.message
    assert "mse_loss" in result.summary and "no known value at init" in result.summary


def test_soft_bce_targets_skip_with_reason():
    class Denoiser(M.LitAutoEncoder):
        def training_step(self, batch, batch_idx):
            x, _ = batch
            return F.binary_cross_entropy_with_logits(self(x), (x + 1) / 2)  # intensities in [0, 1]

    result = preflight(Denoiser(), **M.reconstruction_data(), checks=[InitLossCheck()])["init_loss"]
    assert result.status == "skip" and "not 0/1" in result.message, result.message


def test_expected_loss_with_pos_weight_follows_the_formula():
    target = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    pos_weight = torch.tensor([3.0, 0.5])
    with record_loss_calls() as calls:
        F.binary_cross_entropy_with_logits(torch.zeros(3, 2), target, pos_weight=pos_weight)
    # at zero logits each element costs ln 2, a positive one times its pos_weight
    weights = [3.0, 1.0, 3.0, 0.5, 1.0, 1.0]
    reference = sum(w * math.log(2) for w in weights) / len(weights)
    assert expected_initial_loss(calls[0]).value == pytest.approx(reference, rel=1e-12)


def test_the_label_smoothing_floor_is_the_minimum_over_logit_gaps():
    """The closed form against a brute-force minimisation of the smoothed loss over the logit gap."""
    for classes, smoothing in ((10, 0.1), (4, 0.3), (2, 0.05)):
        gaps = torch.linspace(0, 30, 300_001, dtype=torch.float64)
        top = 1 - smoothing + smoothing / classes
        losses = -top * gaps + torch.log(gaps.exp() + classes - 1)
        assert ce_floor(classes, smoothing, math.inf) == pytest.approx(float(losses.min()), abs=1e-9)


def test_an_explicit_num_classes_still_wins():
    result = preflight(M.BinaryBCE(), **M.binary_data(), checks=[InitLossCheck(num_classes=4)])["init_loss"]
    assert result.details["expected"] == pytest.approx(math.log(4))


def test_uniform_labels_sampled_sparsely_are_not_mistaken_for_a_prior():
    """64 labels over 64 classes: their empirical entropy is far below ln 64 by chance alone, and a random
    init predicts near-uniformly; only a skew beyond sampling noise counts as a prior."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, M.IN, generator=g), torch.randint(0, 64, (256,), generator=g)
    data = {"train_dataloaders": torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), 32)}
    result = preflight(M.MLPClassifier(classes=64), **data, checks=[InitLossCheck()])["init_loss"]
    assert result.details["expected"] == pytest.approx(math.log(64)), result.message
    assert "prior_entropy" not in result.details


def test_hugging_face_causal_lm_without_forward_reads_its_loss_call():
    """GPT-2 wrapped as ``self.model`` (no ``forward``), dict batches: its ``ForCausalLMLoss`` calls
    ``cross_entropy`` on the shifted logits; the check reads ``C = vocab_size`` from that call."""
    transformers = pytest.importorskip("transformers", reason="the Hugging Face test needs transformers")

    class Wrapped(pl.LightningModule):
        def __init__(self):
            super().__init__()
            config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
            self.model = transformers.GPT2LMHeadModel(config)

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 64, (32, 16), generator=g)
    rows = [{"input_ids": t, "attention_mask": torch.ones_like(t), "labels": t} for t in ids]
    loader = torch.utils.data.DataLoader(rows, batch_size=16)
    result = preflight(Wrapped(), train_dataloaders=loader, checks=[InitLossCheck()])["init_loss"]
    assert result.status == "pass", result.message
    assert result.details["num_classes"] == 64 and result.details["expected"] == pytest.approx(math.log(64))


def test_a_default_init_on_weakly_skewed_labels_is_never_read_as_a_prior():
    """Mildly skewed labels: a random init is judged against ln C whatever the seed, never read as a prior."""
    for seed in range(20):
        torch.manual_seed(seed)
        result = InitLossCheck().run(CheckContext(_models.MLP(), _models.loader()))
        assert result.details["expected"] == pytest.approx(math.log(4)), (seed, result.message)


class _Distilled(M.MLPClassifier):
    """Hinton distillation from a frozen teacher: 0.7 T^2 KL(teacher_T || student_T) + 0.3 CE, T = 4."""

    def __init__(self):
        super().__init__(classes=4)
        self.teacher = torch.nn.Linear(M.IN, 4).requires_grad_(False)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits, soft = self(x), F.softmax(self.teacher(x) / 4, -1)
        kl = F.kl_div(F.log_softmax(logits / 4, -1), soft, reduction="batchmean")
        return 0.7 * 16 * kl + 0.3 * F.cross_entropy(logits, y)


class _InfoNCE(M.MLPClassifier):
    """SimCLR-style: two noisy views, cross-entropy over in-batch similarities / 0.1 against arange(B)."""

    def training_step(self, batch, batch_idx):
        x, _ = batch
        a = F.normalize(self(x + 0.1 * torch.randn_like(x)), dim=-1)
        b = F.normalize(self(x + 0.1 * torch.randn_like(x)), dim=-1)
        return F.cross_entropy(a @ b.T / 0.1, torch.arange(len(x)))


class _Pinball(M.MLPClassifier):
    """Quantile regression (0.1, 0.5, 0.9) with the pinball loss, written out."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        q = torch.tensor([0.1, 0.5, 0.9])
        error = y.float()[:, None] - self(x)[:, :3]
        return torch.maximum(q * error, (q - 1) * error).mean()


@pytest.mark.parametrize(
    "model", [_Distilled, _InfoNCE, _Pinball], ids=["distillation", "infonce", "pinball"]
)
def test_a_loss_whose_value_at_init_is_not_known_is_skipped_never_failed(model):
    """Unknown losses (distillation) abstain, whatever `num_classes` the preflight was given."""
    result = preflight(model(), **M.classification_data(), num_classes=4, checks=[InitLossCheck()])[0]
    assert result.status == "skip", result.message
    assert "no known value at init" in result.summary or "no single loss call" in result.summary
    assert len(result.summary) <= SUMMARY_LIMIT


class CosineMarginHead(AdamModule):
    """Logits ``30 cos(feature, class weight)`` (a normalised margin head): far above ln C at initialisation
    by design, and no smaller with the last layer's weights scaled down (it normalises them)."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.classes = nn.Linear(16, 32), nn.Linear(32, 10, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return 30.0 * F.normalize(self.body(x), dim=-1) @ F.normalize(self.classes.weight, dim=-1).T

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_a_scaled_head_above_ln_c_by_design_is_inconclusive_unless_the_user_states_the_expected_loss():
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(
        TensorDataset(torch.randn(256, 16, generator=g), torch.randint(0, 10, (256,), generator=g)),
        batch_size=32,
    )
    guessed = preflight(CosineMarginHead(), train_dataloaders=loader, checks=[InitLossCheck()])["init_loss"]
    assert guessed.status == "inconclusive" and "scaled 10x down" in guessed.summary, guessed.summary
    stated = InitLossCheck(expected_loss=math.log(10))
    told = preflight(CosineMarginHead(), train_dataloaders=loader, checks=[stated])["init_loss"]
    assert told.status in ("warn", "fail") and "output_layer_scaled" not in told.details, told.summary


def test_a_recorded_cross_entropy_expects_ln_c():
    with record_loss_calls() as calls:
        F.cross_entropy(torch.zeros(4, 10), torch.tensor([0, 1, 2, 3]))
    assert (calls[0].function, calls[0].num_classes) == ("cross_entropy", 10)
    expectation = expected_initial_loss(calls[0])
    assert expectation.value is not None
    assert (round(expectation.value, 4), expectation.label) == (2.3026, "ln 10")


def test_is_prior_output_tells_a_prior_from_sampling_noise():
    assert is_prior_output(0.01, 0.37, categories=2, samples=64)  # 1:9 labels, a prior-initialised bias
    assert not is_prior_output(0.06, 0.066, categories=64, samples=480)  # uniform labels, sampling noise
