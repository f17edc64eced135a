"""TargetLeakageCheck: a label readable from the inputs without learning fails, naming the feature, batch
entry or position; healthy models (Hugging Face LMs fed ``labels == input_ids`` included) are not flagged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from galleries.preflight.families import _leakage_models as M
from galleries.preflight.families import holdout, target_leakage
from lightning_recipes.checks import CheckContext, PreflightError, preflight
from lightning_recipes.checks.data.target_leakage_check import TargetLeakageCheck
from lightning_recipes.testing import TinyClassifier, fast_trainer
from tests.helpers.saved_results import assert_same_as_saved

from ._models import IN, ManualOptimization, Regressor, loader

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _run(model: Any, data: dict[str, Any], check: TargetLeakageCheck | None = None) -> Any:
    return preflight(model, **data, checks=[check or TargetLeakageCheck()])["target_leakage"]


@pytest.mark.parametrize("case", target_leakage.BUGS, ids=[c.id for c in target_leakage.BUGS])
def test_gallery_bug_is_flagged(case):
    result = _run(case.model(), case.data())
    assert result.status == case.status, result.message
    assert len(result.summary) <= 120 and result.action
    assert result.details[result.details["leaking_test"]]["leak"]


@pytest.mark.parametrize("case", target_leakage.HEALTHY, ids=[c.id for c in target_leakage.HEALTHY])
def test_gallery_healthy_model_is_not_flagged(case):
    result = _run(case.model(), case.data())
    if result.status == "skip":  # a reconstruction loss: the target it consumes is the input itself
        assert "the target is the input" in result.details.get("abstained", result.message), result.message
        return
    assert result.status == "pass", result.message


def test_hf_labels_equal_input_ids_is_told_from_an_unshifted_head_by_what_the_loss_rewards():
    """The classic false-positive trap: the same batch (labels == input_ids) is right for GPT2LMHeadModel,
    which shifts inside its loss, and a leak for a head of one's own without the shift."""
    healthy = _run(M.HFWrapped("gpt2"), M.hf_lm_data())
    shares = healthy.details["copy_targets"]["shares"]
    assert shares["next"] == 1.0 and shares["same"] < 0.2
    leaking = _run(M.GPT2CustomHead(), M.hf_lm_data())
    assert leaking.details["copy_targets"]["shares"]["same"] == 1.0 and leaking.status == "fail"


def test_targets_shifted_the_wrong_way_are_a_copy_one_position_back():
    ids = M.tokens(256, M.S + 1)
    data = {"train_dataloaders": M._loader(ids[:, 1:], ids[:, :-1])}  # target at t = input at t - 1
    result = _run(M.SequenceLM("causal_attention"), data)
    assert result.status == "fail" and result.details["copy_targets"]["leak_shift"] == "back1"


class ShiftsAgain(M.SequenceLM):
    """Causal attention on targets the dataset already shifted, shifted once more in the loss (the Hugging
    Face habit): output ``t`` is trained on the input token ``t + 2``."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        ids, target = batch
        logits = self(ids)[:, :-1]
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target[:, 1:].flatten())


def test_targets_shifted_twice_pair_each_output_with_the_token_two_ahead():
    ids = M.tokens(256, M.S + 1)
    data = {"train_dataloaders": M._loader(ids[:, :-1], ids[:, 1:])}  # target at t = input at t + 1
    result = _run(ShiftsAgain("causal_attention"), data)
    copies = result.details["copy_targets"]
    assert result.status == "fail" and copies["leak_shift"] == "ahead2", result.message
    assert "two ahead" in result.summary and len(result.summary) <= 120
    healthy = _run(M.SequenceLM("causal_attention"), data)
    copies = healthy.details["copy_targets"]
    assert copies["shares"]["next"] == 1.0 and not copies.get("leak")


def test_a_label_copy_the_model_never_reads_is_reported_as_harmless():
    result = _run(M.DictMLP(), M.unread_label_copy_data())
    feature = result.details["single_feature"]
    assert result.status == "pass" and feature["model_reads_it"] is False and not feature["leak"]


def test_too_good_bound_can_be_turned_off_and_states_its_numbers():
    warned = _run(M.MLP(M.IN + M.C), M.onehot_label_data())
    too_good = warned.details["too_good"]
    assert warned.status == "warn" and too_good["bound"] == pytest.approx(0.05 * math.log(4))
    assert too_good["looks"][-1]["loss"] < too_good["bound"]
    assert [look["step"] for look in too_good["looks"]] == [5, 10, 20][: len(too_good["looks"])]
    off = _run(M.MLP(M.IN + M.C), M.onehot_label_data(), TargetLeakageCheck(train_steps=0))
    assert off.status == "pass" and "turned off" in off.details["too_good"]["reason"]


def test_the_short_training_is_fixed_work_and_a_safety_cap_makes_it_inconclusive():
    context = CheckContext(M.MLP(), **{"train_dataloader": M.plain_features_data()["train_dataloaders"]})
    assert TargetLeakageCheck(time_budget=None).run(context).details["too_good"]["looks"][-1]["step"] == 20
    result = TargetLeakageCheck(time_budget=1e-6).run(context)
    assert result.status in ("pass", "inconclusive")
    if result.status == "inconclusive":
        assert result.details["stopped_by_budget"]


def test_without_validation_data_training_batches_are_held_out():
    data = M.label_column_data()
    result = _run(M.MLP(M.IN + 1), {"train_dataloaders": data["train_dataloaders"]})
    assert result.status == "fail" and result.details["held_out"].startswith("held-out training batches")


def test_the_users_model_is_untouched():
    model = M.MLP(M.IN + M.C)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _run(model, M.onehot_label_data())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_target_as_input_false_turns_the_target_reaching_test_off():
    result = _run(M.LabelFedToForward(), M.plain_features_data(), TargetLeakageCheck(target_as_input=False))
    assert "turned off" in result.details["target_as_input"]["reason"]


def test_teacher_forcing_with_the_target_shifted_right_is_legitimate():
    """The decoder of the fixed demo reads target[:t] at position t: outputs up to t must not move when the
    targets from t on change; Lightning's shipped demo reads target[t] and fails."""
    fixed = _run(M.FixedDemoTransformer(), M.lm_data())
    assert fixed.status == "pass" and fixed.details["target_as_input"]["changes"] == [0.0, 0.0, 0.0]
    shipped = _run(M.demo_transformer(), M.lm_data())
    assert shipped.status == "fail" and shipped.details["target_as_input"]["leak"]


class Transliterator(pl.LightningModule):
    """A source of 6 tokens, a target of 9 in one batch entry; ``training_step`` feeds the decoder (a GRU,
    causal) ``target[:, :-1]`` and scores ``target[:, 1:]``, as seq2seq tutorials do. ``mistake``:
    ``"unshifted"`` scores ``target[:, :-1]`` (each position its own input), ``"bidirectional"`` lets every
    position read the whole target (no causal mask)."""

    def __init__(self, mistake: str = "") -> None:
        super().__init__()
        self.mistake = mistake
        self.src, self.tgt = torch.nn.Embedding(12, 16), torch.nn.Embedding(12, 16)
        self.decoder = torch.nn.GRU(16, 16, batch_first=True, bidirectional=mistake == "bidirectional")
        self.out = torch.nn.Linear(32 if mistake == "bidirectional" else 16, 12)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory = self.src(src).mean(1, keepdim=True)
        return self.out(self.decoder(self.tgt(tgt_in) + memory)[0])

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        src, tgt = batch
        scored = tgt[:, :-1] if self.mistake == "unshifted" else tgt[:, 1:]
        return torch.nn.functional.cross_entropy(self(src, tgt[:, :-1]).transpose(1, 2), scored)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _transliteration_data() -> dict[str, Any]:
    data = {}
    for key, seed in (("train_dataloaders", 0), ("val_dataloaders", 1)):
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(0, 12, (256, 6), generator=g)
        tgt = torch.cat([src, src.flip(1)[:, :3]], 1)  # a target of 9 made from the source
        data[key] = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(src, tgt), batch_size=32)
    return data


@pytest.mark.parametrize(
    ("mistake", "status"), [("", "pass"), ("unshifted", "fail"), ("bidirectional", "fail")]
)
def test_a_seq2seq_decoder_fed_the_target_it_is_scored_on_the_next_token_of_is_judged_position_by_position(
    mistake: str, status: str
) -> None:
    """Sealed gallery Z (blind): a transliterator whose step shifts one target entry failed on every healthy
    model (the whole output moves with the target); output ``t`` may read the target up to ``t`` only."""
    torch.manual_seed(0)
    result = _run(Transliterator(mistake), _transliteration_data())
    assert result.status == status, result.message
    fed = result.details["target_as_input"]
    assert fed["starts"] == ([0] if mistake == "unshifted" else [1, 4, 8])  # scored on the next token
    assert (fed["changes"] == [0.0, 0.0, 0.0]) == (status == "pass")


def _onehot_01_data() -> dict[str, Any]:
    out = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 128)):
        x, y = M.features(n, seed)
        out[key] = M._loader(torch.cat([x, torch.nn.functional.one_hot(y, M.C).float()], 1), y)
    return out


def test_blind_spot_a_label_spread_over_unscaled_one_hot_columns_is_missed():
    """Measured blind spot: no single 0/1 column decides the label and the short training stays above the
    bound (about 0.12 x ln 4 after 20 steps); standardised columns are caught (see the gallery)."""
    result = _run(M.MLP(M.IN + M.C), _onehot_01_data())
    assert result.status == "pass"
    assert result.details["single_feature"]["score"] < 0.99
    assert result.details["too_good"]["looks"][-1]["loss"] > result.details["too_good"]["bound"]


def test_as_a_callback_a_leaking_label_column_stops_fit_before_training(tmp_path):
    data = M.label_column_data()
    callbacks = [TargetLeakageCheck(train_steps=0)]
    trainer = fast_trainer(max_steps=2, default_root_dir=tmp_path, callbacks=callbacks, logger=False)
    with pytest.raises(PreflightError, match="target_leakage"):
        trainer.fit(M.MLP(M.IN + 1), data["train_dataloaders"], data["val_dataloaders"])
    assert trainer.global_step == 0
    check = TargetLeakageCheck()
    trainer = fast_trainer(max_steps=2, default_root_dir=tmp_path, callbacks=[check], logger=False)
    plain = M.plain_features_data()
    trainer.fit(M.MLP(), plain["train_dataloaders"], plain["val_dataloaders"])
    assert check.result is not None and check.result.status == "pass" and trainer.global_step == 2


def test_a_loss_that_ignores_the_target_is_not_judged_by_it():
    """A label in pixel (0, 0) of an autoencoder's digits decides nothing for a loss that never reads it."""
    # the label named: by default the target is the image the loss consumes, and every test would skip
    result = _run(M.DigitsAutoencoder(), M.digits_data(leak=True), TargetLeakageCheck(target_key=1))
    assert result.status == "pass", result.message
    assert result.details["target_as_input"]["loss_uses_target"] is False
    assert "loss does not change with the target" in result.details["single_feature"]["reason"]
    assert "loss does not change with the target" in result.details["too_good"]["reason"]
    assert _run(M.MLP(M.IN + 1), M.label_column_data()).details["target_as_input"]["loss_uses_target"] is True


def test_a_zero_initialised_head_leaves_the_loss_dependence_unknown_and_the_leak_is_still_found():
    """Uniform logits give ln C whatever the label: an unchanged loss must not switch (b) off."""
    data = M.label_column_data()
    result = _run(TinyClassifier(in_features=M.IN + 1, num_classes=M.C), data)
    assert result.details["target_as_input"]["loss_uses_target"] is None
    assert result.status == "fail" and result.details["feature"] == f"inputs[:, {M.IN}]"


# ---- saved results (every sub-test branch): `PYTHONPATH=. python tests/checks/data/make_golden_results.py`

GOLDEN = Path(__file__).resolve().parent / "data" / "target_leakage_results.json"
GOLDEN_CASES: dict[str, tuple[str, dict[str, Any]]] = {  # name: (gallery case id, check arguments)
    "mlp_label_column": ("mlp_label_column", {}),  # (b) lookup leak in an input column
    "mlp_label_column:no_val": ("mlp_label_column", {"no_val": True}),  # training batches held out
    "dict_label_copy_read": ("dict_label_copy_read", {}),  # (b) another batch entry, read by the model
    "unread_label_copy": ("unread_label_copy", {}),  # (b) another batch entry the model never reads
    "ho_group_mean_by_label": ("ho_group_mean_by_label", {}),  # (b) encodes the label within each split
    "regression_target_as_feature": ("regression_target_as_feature", {}),  # (b) correlation leak
    "regression": ("regression", {}),  # (b) correlation below the bar; (c) needs classification
    "lm_unshifted_targets": ("lm_unshifted_targets", {}),  # (a) copies the same position
    "ho_lm_shift_reversed": ("ho_lm_shift_reversed", {}),  # (a) copies one position back
    "mlp_label_fed_to_forward": ("mlp_label_fed_to_forward", {}),  # (0) the label reaches the model
    "lightning_demo_transformer_fixed": ("lightning_demo_transformer_fixed", {}),  # (0) sequence targets
    "mlp_onehot_label_columns": ("mlp_onehot_label_columns", {}),  # (c) too good: warn
    "autoencoder_ignoring_labels": ("autoencoder_ignoring_labels", {}),  # the target is the input: skip
    "autoencoder_ignoring_labels:target_key1": ("autoencoder_ignoring_labels", {"target_key": 1}),
    "mlp_plain:off": ("mlp_plain", {"target_as_input": False, "train_steps": 0}),  # (0) and (c) turned off
}


def golden_result(name: str) -> dict[str, Any]:
    """The check's ``to_dict()`` (without its duration) on ``GOLDEN_CASES[name]``, seeded, no time budget."""
    case_id, kwargs = GOLDEN_CASES[name]
    kwargs = dict(kwargs)
    (case,) = [c for c in [*target_leakage.BUGS, *target_leakage.HEALTHY, *holdout.BUGS] if c.id == case_id]
    data = case.data()
    if kwargs.pop("no_val", False):
        data.pop("val_dataloaders")
    torch.manual_seed(0)
    check = TargetLeakageCheck(time_budget=None, **kwargs)
    result = preflight(case.model(), **data, checks=[check], num_threads=1, progress=False)[0].to_dict()
    for key in ("seconds", "summary", "action", "guide", "message"):  # fields compared: status and details
        del result[key]
    return json.loads(json.dumps(result))


@pytest.mark.parametrize("name", list(GOLDEN_CASES))
def test_results_match_those_saved(name):
    saved = json.loads(GOLDEN.read_text())[name]
    got = golden_result(name)
    assert got["status"] == saved["status"]
    assert_same_as_saved(got, saved)


def test_manual_optimisation_is_judged_on_what_can_run_not_an_error():
    """Manual optimisation: the probes replaying the step are "not tested", the data-only probe judges."""
    result = _run(ManualOptimization(), {"train_dataloaders": loader()})
    assert result.status == "pass", result.message
    assert "manual optimisation" in result.details["target_as_input"]["reason"]


def test_num_bins_is_deprecated_and_ignored():
    from lightning_recipes._deprecation import LightningRecipesDeprecationWarning

    with pytest.warns(LightningRecipesDeprecationWarning, match="num_bins"):
        TargetLeakageCheck(num_bins=8)


@pytest.mark.parametrize(("every", "status"), [(200, "warn"), (0, "fail")])
def test_one_feature_that_misses_some_held_out_labels_warns_and_a_copy_fails(every, status):
    """A column equal to the label but on one row in 200 (a sensor that tracks it) predicts held-out labels
    almost perfectly: a leak or a very strong feature, `warn`. Equal on every row it determines the label and
    fails."""
    data = {}
    for key, seed, n in (("train_dataloaders", 0, 1024), ("val_dataloaders", 1, 512)):
        x, y = M.features(n, seed)
        flipped = torch.arange(n) % every == every // 2 if every else torch.zeros(n, dtype=torch.bool)
        x[:, 0] = torch.where(flipped, (y + 1) % M.C, y).float()
        data[key] = M._loader(x, y, batch_size=128, shuffle=seed == 0)
    result = _run(M.MLP(), data)
    feature = result.details["single_feature"]
    assert result.status == status, result.message
    assert feature["leak"] and feature["name"] == result.details["feature"] == "inputs[:, 0]"
    assert (feature["score"] < 1.0) == (status == "warn")
    assert ("tracks it" in result.summary) == (status == "warn") and len(result.summary) <= 120


@pytest.mark.parametrize(("noise", "status"), [(0.0, "fail"), (0.3, "pass")])
def test_a_column_of_bands_of_a_real_target_fails_and_a_noisy_band_passes(noise, status):
    """A price band (the rounded target, known only after the sale) is a step function of the target in its
    order; rounded with noise it is a feature like any other (its bands overlap)."""
    data = {}
    for key, seed, n in (("train_dataloaders", 0, 512), ("val_dataloaders", 1, 256)):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, IN, generator=g)
        y = x[:, 1] + 0.5 * x[:, 2] + 0.3 * torch.randn(n, generator=g)
        x[:, 0] = (y + noise * torch.randn(n, generator=g)).round()
        rows = [{"x": a, "y": b} for a, b in zip(x, y)]
        data[key] = torch.utils.data.DataLoader(rows, batch_size=64, shuffle=seed == 0)
    result = _run(Regressor(), data)
    assert result.status == status, result.message
    if status == "fail":
        assert result.details["feature"] == "inputs[:, 0]" and "bands of the target" in result.summary


class GapFiller(pl.LightningModule):
    """Fills the hidden steps of a series from the shown ones (the model reads ``x * shown`` and ``shown``);
    the squared error is scored on the hidden steps, or (``score_shown``, a mask read the wrong way round) on
    the shown ones, which the model only has to copy."""

    def __init__(self, score_shown: bool = False) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 16))
        self.score_shown = score_shown

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, shown = batch
        scored = shown if self.score_shown else 1 - shown
        filled = self.net(torch.cat([x * shown, shown], -1))
        return ((filled - x) ** 2 * scored).sum() / scored.sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _gaps(missing_filled_with: float | None = None) -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(128, 16, generator=generator).cumsum(-1)
    shown = (torch.rand(128, 16, generator=generator) > 0.3).float()
    if missing_filled_with is not None:  # really missing data: nothing behind a gap but the fill
        x = torch.where(shown.bool(), x, missing_filled_with)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, shown), batch_size=32)


@pytest.mark.parametrize(
    ("score_shown", "fill", "found"),
    [(True, None, "leak"), (False, None, "no leak"), (True, 0.0, "abstains")],
    ids=["scored_where_shown", "scored_where_hidden", "missing_values_not_scored"],
)
def test_a_loss_scored_only_on_values_the_model_is_shown_fails(score_shown, fill, found):
    result = _run(GapFiller(score_shown), {"train_dataloaders": _gaps(fill)})
    record = result.details.get("hidden_unscored", {"reason": result.summary})  # a skip: no sub-test applies
    assert record.get("leak", "abstains") == {"leak": True, "no leak": False}.get(found, "abstains"), record
    if found == "leak":
        assert result.status == "fail" and result.details["leaking_test"] == "hidden_unscored"
        assert "never scored" in result.summary and len(result.summary) <= 120
