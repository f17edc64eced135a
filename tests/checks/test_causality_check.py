"""CausalityCheck: next-token models that read the future fail, naming the output position and the later input
it reads; causal models pass; bidirectional models whose task allows it are skipped, saying why."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from galleries.preflight.families import _leakage_models as M
from galleries.preflight.families import causality
from lightning_recipes.checks import CheckContext, PreflightError, preflight
from lightning_recipes.checks.model.causality_check import CausalityCheck, next_token_task
from lightning_recipes.testing import fast_trainer

from ._models import AdamModule, SGDModule

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _run(model: pl.LightningModule, data: dict[str, Any], check: CausalityCheck | None = None) -> Any:
    return preflight(model, **data, checks=[check or CausalityCheck()])["causality"]


@pytest.mark.parametrize("case", causality.BUGS, ids=[c.id for c in causality.BUGS])
def test_gallery_bug_is_flagged(case):
    result = _run(case.model(), case.data())
    assert result.status == case.status, result.message
    for word in case.words:
        assert word in result.message, (word, result.message)


# Healthy models whose task is next-token prediction must be checked and pass; bidirectional ones skip.
_CHECKED = {
    "lightning_demo_transformer_fixed",
    "lm_causal_attention",
    "tiny_transformer_lm",
    "lm_gru",
    "lm_causal_conv",
    "forecaster_lstm",
    "hf_gpt2",
}


@pytest.mark.parametrize("case", causality.HEALTHY, ids=[c.id for c in causality.HEALTHY])
def test_gallery_healthy_model_is_not_flagged(case):
    result = _run(case.model(), case.data())
    if case.id in _CHECKED:
        assert result.status == "pass", result.message
        assert result.details["measured"] == 0.0
    else:
        assert result.status == "skip", result.message
        assert "not next-token prediction" in result.message and "causal=True" in result.message


class PlantedLeak(SGDModule):
    """Causal by construction (a running mean over the prefix) except at one output position ``at``, which
    also reads the input ``ahead`` steps later: the reference the check must localise exactly."""

    def __init__(self, at: int, ahead: int, tokens: bool = True) -> None:
        super().__init__()
        self.at, self.ahead, self.tokens = at, ahead, tokens
        self.embed = nn.Embedding(M.V, 8) if tokens else nn.Linear(1, 8)
        self.head = nn.Linear(8, M.V if tokens else 1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.embed(x)
        prefix = h.cumsum(1) / torch.arange(1, h.shape[1] + 1, device=h.device)[:, None]
        extra = torch.zeros_like(prefix)
        extra[:, self.at] = h[:, self.at + self.ahead]
        return self.head(prefix + extra)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        out = self(x)
        return F.cross_entropy(out.flatten(0, 1), y.flatten()) if self.tokens else F.mse_loss(out, y)


@pytest.mark.parametrize(("tokens", "method"), [(True, "perturbation"), (False, "perturbation")])
def test_planted_leak_is_localised_to_the_exact_positions(tokens, method):
    data = M.lm_data() if tokens else M.forecast_data()
    result = _run(PlantedLeak(at=7, ahead=3, tokens=tokens), data)
    assert result.status == "fail", result.message
    assert result.details["method"] == method
    assert result.details["leak"] == {"output_position": 7, "input_position": 10, "reads_further": False}
    assert len(result.summary) <= 120 and "is_causal=True" in result.action


def test_blind_spot_a_leak_between_the_probed_positions_needs_more_positions():
    """Measured blind spot: only ``num_positions`` positions (0, 7, 14 of 16) are probed by default."""
    assert _run(PlantedLeak(at=3, ahead=1), M.lm_data()).status == "pass"
    result = _run(PlantedLeak(at=3, ahead=1), M.lm_data(), CausalityCheck(num_positions=15))
    assert result.status == "fail" and result.details["leak"]["output_position"] == 3
    assert "off-by-one" in result.message


def test_causal_true_forces_the_check_and_false_turns_it_off():
    assert _run(M.Tagger(), M.tagging_data()).status == "skip"
    forced = _run(M.Tagger(), M.tagging_data(), CausalityCheck(causal=True))
    assert forced.status == "fail" and forced.details["task"] == "declared with causal=True"
    off = _run(M.SequenceLM("full_attention"), M.lm_data(), CausalityCheck(causal=False))
    assert off.status == "skip" and "causal=False" in off.message


class AlwaysDropoutLM(M.SequenceLM):
    """A causal LM whose dropout ignores eval mode (``training=True``): the compared passes are seeded."""

    def forward(self, ids: Tensor) -> Tensor:
        return F.dropout(super().forward(ids), p=0.5, training=True)


def test_dropout_that_ignores_eval_mode_causes_no_false_alarm():
    result = _run(AlwaysDropoutLM("causal_attention"), M.lm_data())
    assert result.status == "pass", result.message


def test_zero_initialised_head_is_trained_on_the_copy_only():
    model = M.tiny_lm()  # zero-initialised head: no output depends on any input at init
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = _run(model, M.token_lm_data())
    assert result.status == "pass" and result.details["training_steps_first"] >= 1
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_next_token_task_allows_ignore_index_and_padding():
    ids = M.tokens(4, 9)
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[:, -3:] = -100  # padding ignored by the loss
    assert next_token_task((inputs, targets), inputs, targets)[0]
    labels = ids.clone()
    labels[:, :2] = -100
    assert next_token_task({"input_ids": ids, "labels": labels}, ids, labels)[0]
    assert not next_token_task((ids, ids), ids, ids)[0]  # unshifted: target_leakage's business
    masked = ids.clone()
    masked[:, 3] = 0  # masked language modelling: the input differs from the label where it is masked
    assert not next_token_task({"input_ids": masked, "labels": ids}, masked, ids)[0]


def test_the_output_must_be_position_aligned():
    class Pooled(M.SequenceLM):
        def forward(self, ids: Tensor) -> Tensor:
            return super().forward(ids).mean(1)

    context = CheckContext(Pooled(), M.lm_data()["train_dataloaders"])
    result = CausalityCheck().run(context)
    assert result.status == "skip" and "not [B, S, ...]" in result.message


def test_as_a_callback_a_leaking_lm_stops_fit_before_training(tmp_path):
    data = M.lm_data()
    trainer = fast_trainer(max_steps=2, default_root_dir=tmp_path, callbacks=[CausalityCheck()], logger=False)
    with pytest.raises(PreflightError, match="causality"):
        trainer.fit(M.SequenceLM("full_attention"), data["train_dataloaders"])
    assert trainer.global_step == 0
    check = CausalityCheck()
    trainer = fast_trainer(max_steps=2, default_root_dir=tmp_path, callbacks=[check], logger=False)
    trainer.fit(M.SequenceLM("causal_attention"), data["train_dataloaders"])
    assert check.result is not None and check.result.status == "pass" and trainer.global_step == 2


class Forecaster(AdamModule):
    """Next-step forecast of feature 0 of a 3-feature series ``[B, T, 3]`` (targets ``[B, T]``) with a 1-D
    conv over time: ``left`` padding (causal) or ``same`` padding (centred: reads ``k // 2`` future steps)."""

    def __init__(self, padding: str = "left", kernel: int = 5) -> None:
        super().__init__()
        self.padding, self.kernel = padding, kernel
        self.conv = nn.Conv1d(3, 16, kernel)
        self.head = nn.Linear(16, 1)

    def forward(self, x: Tensor) -> Tensor:
        k = self.kernel - 1
        pad = (k, 0) if self.padding == "left" else (k // 2, k - k // 2)
        h = torch.relu(self.conv(F.pad(x.transpose(1, 2), pad))).transpose(1, 2)
        return self.head(h)[..., 0]

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


def forecast_data(n: int = 64, steps: int = 24) -> dict[str, Any]:
    """A noisy sine (feature 0) with two covariates; the target at ``t`` is feature 0 at ``t + 1``."""
    g = torch.Generator().manual_seed(0)
    t = torch.arange(steps + 1, dtype=torch.float32)
    phase = torch.rand(n, 1, generator=g) * 6.28
    series = torch.sin(0.3 * t + phase) + 0.1 * torch.randn(n, steps + 1, generator=g)
    covariates = torch.randn(n, steps + 1, 2, generator=g)
    x = torch.cat([series[..., None], covariates], -1)[:, :-1]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, series[:, 1:]), batch_size=16)
    return {"train_dataloaders": loader}


def test_a_next_step_forecast_of_some_input_features_is_inferred_as_causal():
    data = forecast_data()
    x, y = next(iter(data["train_dataloaders"]))
    causal, how = next_token_task((x, y), x, y)
    assert causal and "one step ahead" in how
    assert not next_token_task((x, y + 1), x, y + 1)[0]  # another target: not inferred, the check abstains


def test_a_forecaster_whose_centred_conv_reads_future_steps_fails_and_a_causal_one_passes():
    leaking = _run(Forecaster("same"), forecast_data())
    assert leaking.status == "fail", leaking.message
    assert leaking.details["leak"]["input_position"] > leaking.details["leak"]["output_position"]
    healthy = _run(Forecaster("left"), forecast_data())
    assert healthy.status == "pass", healthy.message


def test_per_position_targets_of_another_width_are_not_next_token_prediction():
    """3-D pose lifting: targets ``[B, J, 3]`` per joint from inputs ``[B, J, 2]``. Comparing the shifted
    targets with the inputs must say "not next-token", not raise on the widths."""
    joints2d, joints3d = torch.randn(8, 10, 2), torch.randn(8, 10, 3)
    task, why = next_token_task((joints2d, joints3d), joints2d, joints3d)
    assert not task and "[8, 10, 3]" in why


class SessionLM(AdamModule):
    """Next item of a session served as a 1-tuple ``(items,)``: the step reads ``items[:, :-1]`` and scores
    ``items[:, 1:]``; one self-attention layer with or without its causal mask."""

    def __init__(self, masked: bool) -> None:
        super().__init__()
        self.masked = masked
        self.embed = nn.Embedding(20, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 20)

    def forward(self, items: Tensor) -> Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(items.shape[1]) if self.masked else None
        return self.head(self.layer(self.embed(items), src_mask=mask))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        (items,) = batch
        return F.cross_entropy(self(items[:, :-1]).flatten(0, 1), items[:, 1:].flatten())


def test_a_step_that_slices_input_and_target_from_one_sequence_is_next_token_prediction():
    """A one-entry batch is input and target at once: the step's recorded loss target tells the task."""
    items = torch.randint(20, (64, 9), generator=torch.Generator().manual_seed(0))
    data = {"train_dataloaders": torch.utils.data.DataLoader(torch.utils.data.TensorDataset(items), 16)}
    leaking = _run(SessionLM(masked=False), data)
    assert leaking.status == "fail" and "one position ahead" in leaking.details["task"], leaking.message
    healthy = _run(SessionLM(masked=True), data)
    assert healthy.status == "pass", healthy.message


class AnswerTracer(AdamModule):
    """Knowledge tracing on ``(skill, correct)`` batches: a GRU reads the attempts and scores, after each one,
    the answer to the next (BCE on ``correct[:, 1:]``); ``shifted=False`` feeds ``[:, 1:]`` like the targets,
    so each position reads its own answer."""

    def __init__(self, shifted: bool) -> None:
        super().__init__()
        self.shifted = shifted
        self.embed, self.gru, self.head = (
            nn.Embedding(12, 16),
            nn.GRU(16, 16, batch_first=True),
            nn.Linear(16, 6),
        )

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        skill, correct = batch
        seen = slice(None, -1) if self.shifted else slice(1, None)
        states = self.gru(self.embed(skill[:, seen] + 6 * correct[:, seen].long()))[0]
        logits = self.head(states).gather(-1, skill[:, 1:, None]).squeeze(-1)
        return F.binary_cross_entropy_with_logits(logits, correct[:, 1:])


def test_a_sequence_entry_that_holds_the_next_targets_is_read_in_order():
    """The loss target is ``correct[:, 1:]``: the output at position t may read ``correct`` up to t only."""
    g = torch.Generator().manual_seed(0)
    skill, correct = torch.randint(6, (64, 10), generator=g), torch.randint(2, (64, 10), generator=g).float()
    data = {
        "train_dataloaders": torch.utils.data.DataLoader(torch.utils.data.TensorDataset(skill, correct), 16)
    }
    leaking = _run(AnswerTracer(shifted=False), data)
    assert leaking.status == "fail" and "batch[1] one position ahead" in leaking.details["task"], (
        leaking.message
    )
    assert leaking.details["leak"] == {"output_position": 0, "input_position": 1, "reads_further": False}
    assert _run(AnswerTracer(shifted=True), data).status == "pass"
