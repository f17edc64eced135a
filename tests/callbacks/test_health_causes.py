"""HealthMonitor names the root cause the evidence separates, not the nearest symptom's (issue #35)."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.callbacks._health_evidence import evidence_of
from lightning_recipes.callbacks._health_rules import lr_blew_up_from_the_first_step
from lightning_recipes.callbacks._health_rules_layers import exploding_from_start, exploding_gradients
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,
    HEADLINE_LIMIT,
    Cause,
    CheckData,
    Finding,
    History,
)
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.testing import fast_trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class ReluNet(pl.LightningModule):
    """16 -> 64 -> 64 -> 4 with functional ReLUs (dead units read from the Linear rows), SGD + momentum."""

    def __init__(self, lr: float, bias: float = 0.0, optimizer: str = "sgd") -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 4)
        if bias:
            with torch.no_grad():
                self.fc1.bias.fill_(bias)
        self.lr, self.optimizer = lr, optimizer

    def forward(self, x: Tensor) -> Tensor:
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self) -> Any:
        if self.optimizer == "adamw":
            return torch.optim.AdamW(self.parameters(), lr=self.lr)
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def teacher(n: int = 4096, sentinel_rows: tuple[int, ...] = (), seed: int = 0) -> tuple[Tensor, Tensor]:
    """Standardised inputs, a random linear teacher's labels; ``sentinel_rows`` read -999 in column 3."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
    for row in sentinel_rows:
        x[row, 3] = -999.0
    return x, y


def fit(model: pl.LightningModule, x: Tensor, y: Tensor, steps: int, **trainer: Any) -> HealthMonitor:
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None)
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    fast_trainer(max_steps=steps, max_epochs=-1, callbacks=[monitor], limit_val_batches=0, **trainer).fit(
        model, loader
    )
    return monitor


def only(monitor: HealthMonitor) -> Finding:
    assert len(monitor.findings) == 1, [(f.problem, f.step, f.headline) for f in monitor.findings]
    return monitor.findings[0]


def assert_record(finding: Finding) -> None:
    assert len(finding.headline) <= HEADLINE_LIMIT and str(finding.step) in finding.headline
    assert finding.causes and all(isinstance(c, Cause) for c in finding.causes)
    if finding.cause is not None:
        assert finding.causes[0].name == finding.cause and finding.causes[0].evidence_for
        assert finding.action and not finding.tell_apart
    else:
        assert finding.tell_apart and not finding.action


# ------------------------------------------------------------------------------------- dead units: 3 causes

SPIKES = (32 * 50 + 5, 32 * 51 + 7, 32 * 52 + 1)  # one -999 row in each of the batches at steps 50, 51, 52


def test_units_killed_right_after_a_few_outlier_batches_are_the_data_not_the_lr() -> None:
    # units lived 40+ steps at this LR and died right after the -999 batches: the batches, not the LR
    monitor = fit(ReluNet(lr=0.05), *teacher(sentinel_rows=SPIKES), steps=110)
    assert [f.problem for f in monitor.findings] == ["outlier_batches", "dead_units"], [
        (f.problem, f.step, f.headline) for f in monitor.findings
    ]
    batches, finding = monitor.findings
    assert set(batches.evidence["steps"]) <= {50, 51, 52, 53} and "999" in batches.evidence["rows"][0]
    assert finding.cause == "outlier_batches", finding.headline
    assert set(finding.causes[0].evidence_for["spike_steps"]) <= {50, 51, 52, 53}
    assert "52" in finding.headline and "Lower" not in finding.advice
    assert "learning rate" not in finding.action
    lr = next(c for c in finding.causes if c.name == "learning_rate")
    assert lr.evidence_for and lr.evidence_against["alive_at_same_lr_and_ratio"]["step"] == 40
    assert_record(finding)


def test_units_killed_by_the_lr_are_still_the_lr() -> None:
    # the blind twin: dead units too, the same data without the sentinel rows, an LR 20x higher
    finding = only(fit(ReluNet(lr=1.0), *teacher(), steps=110))
    assert (finding.problem, finding.cause) == ("lr_too_high", "learning_rate"), finding.headline
    assert "dead_fraction" in finding.evidence and "Lower" in finding.advice
    assert_record(finding)


@pytest.mark.parametrize("lr", [0.1, 1.0])
def test_units_dead_at_step_0_are_the_initialisation_whatever_the_lr(lr: float) -> None:
    # first-layer biases at -1.5: most units never fire on the first batch, before any update
    monitor = fit(ReluNet(lr=lr, bias=-1.5), *teacher(), steps=80)
    finding = monitor.findings[0]
    assert (finding.problem, finding.cause) == ("dead_units", "initialisation"), finding.headline
    assert finding.causes[0].evidence_for["dead_at_step_0"]["fc1"] >= 0.5
    assert "step 0" in finding.headline and "Lower" not in finding.advice
    assert all(f.problem != "lr_too_high" for f in monitor.findings)
    assert_record(finding)


# ---------------------------------------------------------------------------------- a NaN update (repro 6)


class NanStep(ReluNet):
    """The loss of step 30 is NaN; its update writes NaN into every weight, every batch finite."""

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == 30 else loss


def test_a_nan_update_is_named_with_its_step_optimizer_and_lr_not_the_inputs() -> None:
    finding = only(fit(NanStep(lr=3e-3, optimizer="adamw"), *teacher(1024), steps=60))
    assert (finding.problem, finding.cause) == ("nonfinite_activations", "nonfinite_weights")
    assert finding.evidence["nonfinite_loss_step"] == 30 and finding.evidence["weights_finite_at_step"] == 20
    assert finding.evidence["optimizer"] == "AdamW" and math.isclose(finding.evidence["lr"], 3e-3)
    assert "step 30" in finding.headline and "AdamW" in finding.headline and "0.003" in finding.headline
    inputs = next(c for c in finding.causes if c.name == "inputs")
    assert inputs.excluded and "Check its inputs" not in finding.advice
    assert_record(finding)


# ------------------------------------------------------------------------ a diverged run (repro 5)


def test_a_diverged_run_is_not_overfitting() -> None:
    # AdamW at 1.0: chance accuracy, training loss above its start: the LR's finding, never overfitting
    x, y = teacher(768)
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=10, on_finding=lambda f: None)
    train = DataLoader(TensorDataset(x[:512], y[:512]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[512:], y[512:]), batch_size=128)
    fast_trainer(max_epochs=12, callbacks=[monitor]).fit(ReluNet(lr=1.0, optimizer="adamw"), train, val)
    problems = {f.problem for f in monitor.findings}
    assert "overfitting" not in problems and problems & {"lr_too_high", "not_learning"}, problems


# ------------------------------------------------------------------------ runs that learn nothing (repro 7)


def digits(shuffled_apart: bool) -> DataLoader:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    y = torch.tensor(data.target)
    if shuffled_apart:  # the bug: inputs and labels split by two independent shuffles
        x = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(1))]
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(2))]
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


def test_a_classifier_whose_labels_were_shuffled_apart_from_its_inputs_is_not_learning() -> None:
    # the loss sits at ln 10; the twin with the labels in place learns and gets no finding
    found = []
    for apart in (True, False):
        torch.manual_seed(0)
        monitor = HealthMonitor(check_every_n_steps=50, on_finding=lambda f: None)
        model = Task(relu_mlp(64, 128, 128, 10), F.cross_entropy, lambda p: torch.optim.Adam(p, lr=1e-3))
        fast_trainer(max_steps=300, max_epochs=-1, callbacks=[monitor]).fit(model, digits(apart))
        found.append(monitor.findings)
    finding = found[0][0]
    assert finding.problem == "not_learning" and found[1] == [], found
    assert math.isclose(finding.evidence["start_loss"], math.log(10), rel_tol=0.03)
    assert finding.evidence["ranked_causes"][0] == "labels_do_not_match_inputs"
    assert finding.cause is None and "overfit_batch" in finding.tell_apart  # no validation: undetermined
    assert_record(finding)


# ------------------------------------------------------------------- a group frozen by the optimizer's LR


class SplitLrNet(ReluNet):
    """ReluNet with its first layer at ``lr * first_mult`` (frozen when ``first_mult=None``)."""

    def __init__(self, first_mult: float | None) -> None:
        super().__init__(lr=3e-3)
        self.first_mult = first_mult
        if first_mult is None:
            self.fc1.requires_grad_(False)

    def configure_optimizers(self) -> Any:
        rest = [*self.fc2.parameters(), *self.head.parameters()]
        if self.first_mult is None:
            return torch.optim.Adam(rest, lr=self.lr)
        first = {"params": self.fc1.parameters(), "lr": self.lr * self.first_mult}
        return torch.optim.Adam([first, {"params": rest}], lr=self.lr)


def test_a_group_at_lr_0_that_gets_gradients_is_frozen_by_the_optimizer_not_by_intent() -> None:
    # zoo 5's VAE: a group at lr 0 with gradients; frozen on purpose, or at lr / 10: no finding
    finding = only(fit(SplitLrNet(1 // 10), *teacher(), steps=60))
    assert (finding.problem, finding.cause) == ("lr_too_low", "frozen_parameters")
    assert finding.evidence["frozen_groups"] == ["fc1"] and finding.evidence["lr"] == 0.0
    assert "requires_grad_(False)" in finding.action
    assert_record(finding)
    assert fit(SplitLrNet(None), *teacher(), steps=60).findings == []
    assert fit(SplitLrNet(1 / 10), *teacher(), steps=60).findings == []


class FirstLayerLeftOut(SplitLrNet):
    """The optimizer is built over fc2 and the head only, while fc1 still requires gradients."""

    def __init__(self) -> None:
        super().__init__(first_mult=None)
        self.fc1.requires_grad_(True)


def test_parameters_that_get_gradients_in_no_optimizer_are_frozen_by_the_optimizer() -> None:
    # zoos 6 and 7: a seq2seq whose optimizer holds the head (or misses the encoder's group)
    finding = only(fit(FirstLayerLeftOut(), *teacher(), steps=60))
    assert (finding.problem, finding.cause) == ("lr_too_low", "frozen_parameters")
    evidence = finding.evidence
    assert evidence["held_by_no_optimizer"] == ["fc1"] and evidence["frozen_groups"] == ["fc1"]
    assert "no optimizer holds `fc1`" in finding.action
    assert_record(finding)


class UnfreezeIntoTheOptimizer(pl.Callback):
    """Unfreezes ``fc1`` at step 20 and adds it to the optimizer as a new group (backbone fine-tuning)."""

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == 20:
            pl_module.fc1.requires_grad_(True)
            trainer.optimizers[0].add_param_group({"params": list(pl_module.fc1.parameters())})


def test_a_group_added_to_the_optimizer_during_the_run_is_held_by_it() -> None:
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None)
    loader = DataLoader(TensorDataset(*teacher()), batch_size=32)
    callbacks = [monitor, UnfreezeIntoTheOptimizer()]
    trainer = fast_trainer(max_steps=80, max_epochs=-1, callbacks=callbacks, limit_val_batches=0)
    trainer.fit(SplitLrNet(None), loader)
    assert monitor.findings == [], [(f.problem, f.evidence) for f in monitor.findings]


class UnusedOutputs(ReluNet):
    """An ``nn.Sequential`` MLP whose last layer has 8 outputs, 4 of them unused (a flow's coupling net whose
    masked half is multiplied by 0) and never positive: they end the Sequential, so none is a dead unit."""

    def __init__(self) -> None:
        super().__init__(lr=3e-3, optimizer="adamw")
        del self.fc1, self.fc2, self.head
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
        with torch.no_grad():
            self.net[2].bias[4:].fill_(-20.0)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)[:, :4]


def test_outputs_that_end_a_sequential_are_not_dead_units() -> None:
    # sealed zoos 6 and 7: RealNVP couplings (their last layer's masked half) read as dead from step 0
    monitor = fit(UnusedOutputs(), *teacher(), steps=60)
    assert monitor.findings == [], [(f.problem, f.evidence) for f in monitor.findings]


class CutAfterFirstLayer(ReluNet):
    """A leftover ``torch.zeros_like`` replaces the first layer's output: no path from the loss reaches it."""

    def forward(self, x: Tensor) -> Tensor:
        h = torch.zeros_like(F.relu(self.fc1(x)))
        return self.head(F.relu(self.fc2(h)))


def test_a_layer_the_loss_never_reaches_has_no_vanishing_gradient() -> None:
    # sealed zoo 6: a decoder started from zeros instead of the encoder's state (gradient exactly 0)
    problems = {f.problem for f in fit(CutAfterFirstLayer(lr=0.01), *teacher(), steps=120).findings}
    assert "vanishing_gradients" not in problems, problems


@pytest.mark.parametrize("largest_input", [999.0, 3.0])
def test_a_sampled_gradient_on_an_outlier_batch_is_its_spike_not_an_explosion(largest_input: float) -> None:
    # sealed zoo 6: two points in millimetres come back each epoch; one lands on the check's sampled step
    records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 3.0) for k in range(19)]
    records.append((19, 5000.0, 19, 5, 0, largest_input))  # the interval's last step: the sampled one
    data = CheckData(200, 4, grad_sampled=True, grad_total=5000.0, step_records=records)
    found = exploding_gradients(evidence_of(data, History(grad_totals=[1.1, 1.2]), DEFAULT_THRESHOLDS))
    assert (found is None) == (largest_input == 999.0)


@pytest.mark.parametrize("lr", [0.2, 1e-4])
def test_an_adaptive_first_step_of_lr_per_element_that_throws_the_weights_is_the_lr(lr: float) -> None:
    # sealed zoo 7: a RealNVP under Adam at 0.2 (meant 1e-3) explodes at step 3 from an ordinary gradient
    data = CheckData(20, 0, param_norm_start=5.77, group_lr={"net": lr}, group_family={"net": "adaptive"})
    data.group_numel, data.step_records = {"net": 10_000}, [(0, 1.3, 0, 0, 0, 1.8), (3, 2.5e7, 3, 0, 0, 1.9)]
    found = lr_blew_up_from_the_first_step(evidence_of(data, History(), DEFAULT_THRESHOLDS), ({}, ""))
    if lr == 1e-4:  # a first step of 1e-4 x sqrt(10^4) / 5.77 = 0.0017 of the weights: not the LR's
        assert found is None
    else:
        assert found is not None and found[0]["optimizer_family"] == "adaptive"
        assert math.isclose(found[0]["first_update_ratio"], 0.2 * 100 / 5.77)


@pytest.mark.parametrize("gap", [0.8, -2.8, math.nan])
def test_a_first_gradient_far_above_the_weights_is_no_exploded_init_when_the_model_beats_its_guess(
    gap: float,
) -> None:
    # sealed zoos 6 and 7: a TCN's loss scaled by 1024 (4096) by hand under Adam, which ignores the scale
    data = CheckData(20, 0, loss_head=300.0, loss_mean=150.0, grad_sampled=True, grad_total=1900.0)
    data.param_norm_start, data.step_records = 8.0, [(0, 8300.0, 0, 0, 0, 1.0)]
    data.input_free_gap, data.input_free_gap_se, data.input_free_loss = gap, 0.12, 0.86
    found = exploding_from_start(evidence_of(data, History(), DEFAULT_THRESHOLDS))
    # beats its own input-free guess: its outputs did not blow up; worse than it or unmeasured: judged
    assert (found is None) == (gap == 0.8), found


# ------------------------------------------------------------------------------------- the record itself


def test_a_finding_is_a_record_that_survives_state_dict_and_json() -> None:
    monitor = fit(ReluNet(lr=0.1, bias=-1.5), *teacher(), steps=60)
    finding = monitor.findings[0]
    restored = HealthMonitor()
    restored.load_state_dict(monitor.state_dict())
    assert restored.findings == monitor.findings
    record = json.loads(monitor.to_json())["findings"][0]
    assert record["cause"] == "initialisation" and record["causes"][0]["evidence_for"]["dead_at_step_0"]
    assert set(record) >= {"problem", "step", "epoch", "evidence", "advice", "headline", "causes", "action"}
    old = {k: v for k, v in record.items() if k in ("problem", "step", "epoch", "evidence", "advice")}
    assert Finding(**old).headline.startswith(f"dead_units at step {finding.step}")  # a pre-#35 record
    assert str(finding) == finding.summary() and finding.summary().startswith("dead_units at step")


PAD, EOS, VOCAB, LENGTH = 0, 1, 24, 12


def token_mapping(n: int = 1024, seed: int = 0) -> DataLoader:
    """The client's project B: map each token through a fixed permutation (dict batches, -100 padding)."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(VOCAB - 2, generator=torch.Generator().manual_seed(123)) + 2
    rows = []
    for _ in range(n):
        size = int(torch.randint(4, LENGTH, (1,), generator=g))
        tokens = torch.randint(2, VOCAB, (size,), generator=g)
        ids, labels = torch.full((LENGTH + 1,), PAD), torch.full((LENGTH + 1,), -100)
        ids[:size], ids[size] = tokens, EOS
        labels[:size], labels[size] = perm[tokens - 2], EOS
        rows.append({"input_ids": ids, "attention_mask": (ids != PAD).long(), "labels": labels})
    return DataLoader(rows, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))


class TinyBart(pl.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        from transformers import BartConfig, BartForConditionalGeneration

        config = BartConfig(
            vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, max_position_embeddings=32,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=PAD, eos_token_id=EOS,
            bos_token_id=EOS, decoder_start_token_id=EOS, forced_eos_token_id=None,
        )  # fmt: skip
        self.model, self.lr = BartForConditionalGeneration(config), lr

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.05)


@pytest.mark.slow
def test_a_transformer_at_10x_its_lr_stuck_at_chance_is_not_learning_and_the_lr_is_named() -> None:
    # repro 7: 10x its good LR, the loss stays ~93% of its start; at the good LR: no finding
    pytest.importorskip("transformers")
    found = []
    for lr in (0.03, 3e-3):
        torch.manual_seed(0)
        monitor = HealthMonitor(check_every_n_steps=50, on_finding=lambda f: None)
        fast_trainer(max_steps=384, max_epochs=-1, callbacks=[monitor]).fit(TinyBart(lr), token_mapping())
        found.append(monitor.findings)
    assert [f.problem for f in found[0]] == ["not_learning"] and found[1] == [], found
    finding = found[0][0]
    assert finding.cause == "lr_too_high" and finding.causes[0].evidence_for["weight_growth"] > 2
    assert "Lower the learning rate" in finding.action
    assert_record(finding)


# ------------------------------------------------------ the sealed zoo's four failures, as general rules
# Each rule with its blind twin: the same symptom from a different cause, told apart by the evidence.


class Task(pl.LightningModule):
    def __init__(self, net: nn.Module, loss: Any, optimizer: Any) -> None:
        super().__init__()
        self.net, self.loss, self.optimizer = net, loss, optimizer

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return self.optimizer(self.parameters())


def relu_mlp(*sizes: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def sgd(lr: float) -> Any:
    return lambda params: torch.optim.SGD(params, lr=lr, momentum=0.9)


def findings_of(model: pl.LightningModule, loader: DataLoader, steps: int, every: int) -> list[Finding]:
    torch.manual_seed(0)
    monitor = HealthMonitor(check_every_n_steps=every, on_finding=lambda f: None)
    fast_trainer(max_steps=steps, max_epochs=-1, callbacks=[monitor], limit_val_batches=0).fit(model, loader)
    return monitor.findings


def sensor_log(sentinel: bool) -> DataLoader:
    """A regression read in time order (40 batches of 50); four rows of batch 25 carry -99 in column 3."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2000, 10, generator=g)
    y = (torch.tanh(x[:, 0] - x[:, 1]) + 0.5 * x[:, 2]).unsqueeze(1)
    if sentinel:
        x[25 * 50 + 3 : 25 * 50 + 7, 3] = -99.0
    return DataLoader(TensorDataset(x, y), batch_size=50)


def test_an_explosion_set_off_by_an_outlier_batch_names_the_batch_and_never_the_lr() -> None:
    # the batch of step 25 spikes, and at step 65 sets off an explosion: the batch; without it: clean
    torch.manual_seed(0)
    found = findings_of(Task(relu_mlp(10, 64, 64, 1), F.mse_loss, sgd(0.01)), sensor_log(True), 70, 10)
    torch.manual_seed(0)
    assert findings_of(Task(relu_mlp(10, 64, 64, 1), F.mse_loss, sgd(0.01)), sensor_log(False), 70, 10) == []
    assert [(f.problem, f.step) for f in found] == [("outlier_batches", 30), ("exploding_gradients", 70)]
    assert found[0].evidence["steps"] == [25] and "99" in found[0].evidence["rows"][0]
    explosion = found[1]
    assert explosion.cause == "outlier_batches" and explosion.evidence["outlier_steps"] == [65]
    assert "batch 25 at step 65" in explosion.headline and "Keep the LR" in explosion.action
    assert explosion.causes[1].evidence_against["began_on_outlier_batch"] == 65
    assert_record(explosion)


class IRNN(nn.Module):
    """Le, Jaitly & Hinton's ReLU RNN (recurrent weights at the identity), without their gradient clipping."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.RNN(2, 32, nonlinearity="relu", batch_first=True)
        with torch.no_grad():
            self.rnn.weight_hh_l0.copy_(torch.eye(32))
            self.rnn.bias_hh_l0.zero_()
            self.rnn.bias_ih_l0.zero_()
            self.rnn.weight_ih_l0.normal_(0, 0.001)
        self.head = nn.Linear(32, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.rnn(x)[0][:, -1])


def adding_problem(rows: int = 2000, length: int = 60) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    values, marks = torch.rand(rows, length, generator=g), torch.zeros(rows, length)
    marks[torch.arange(rows), torch.randint(0, length // 2, (rows,), generator=g)] = 1.0
    marks[torch.arange(rows), torch.randint(length // 2, length, (rows,), generator=g)] = 1.0
    target = (values * marks).sum(1, keepdim=True)
    return DataLoader(TensorDataset(torch.stack([values, marks], 2), target), batch_size=32, shuffle=True)


def test_an_rnn_whose_gradients_explode_between_checks_is_exploding_not_lr_too_low() -> None:
    # weights blown up ~1e6x make the update ratio tiny: not the LR; the same RNN at 1e-5x the LR is
    torch.manual_seed(0)
    found = findings_of(Task(IRNN(), F.mse_loss, sgd(0.01)), adding_problem(), 160, 10)
    assert [(f.problem, f.step) for f in found] == [("exploding_gradients", 10)], [f.headline for f in found]
    assert found[0].evidence["step_grad_norm_vs_before"] > 100 and found[0].evidence["exploded_steps"]
    torch.manual_seed(0)
    twin = findings_of(Task(IRNN(), F.mse_loss, sgd(1e-7)), adding_problem(), 100, 10)
    assert [f.problem for f in twin] == ["lr_too_low"], [f.headline for f in twin]


def test_sgd_at_an_adam_sized_lr_sitting_at_chance_is_lr_too_low() -> None:
    # SGD at 2e-5 sits at ln 10 with steps above the SGD floor: lr_too_low; at a working LR: nothing
    def run(lr: float) -> list[Finding]:
        torch.manual_seed(0)
        return findings_of(Task(relu_mlp(64, 128, 128, 10), F.cross_entropy, sgd(lr)), digits(False), 150, 25)

    found = run(2e-5)
    assert [f.problem for f in found] == ["lr_too_low"], [f.headline for f in found]
    assert found[0].evidence["floor"] == 1e-4 and "Raise the learning rate" in found[0].advice
    assert run(0.05) == []


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(6, 32), nn.Parameter(torch.randn(16, 32) * 0.02)
        layer = nn.TransformerEncoderLayer(
            32, 4, 64, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.blocks(self.embed(x) + self.position).mean(1))


def majority_tokens() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 6, (2000, 16), generator=g)
    counts = torch.stack([(x == t).sum(1) for t in (1, 2, 3)], 1).float()
    y = (counts + 0.01 * torch.arange(3, 0, -1)).argmax(1)
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


def test_adamw_far_too_high_on_a_tiny_transformer_is_lr_too_high_and_its_good_lr_is_clean() -> None:
    # AdamW at 5e-2 without warm-up: named at its rise (step 160); at 1e-3: nothing
    def run(lr: float) -> list[Finding]:
        torch.manual_seed(0)
        optimizer = lambda params: torch.optim.AdamW(params, lr=lr)  # noqa: E731
        return findings_of(Task(TinyTransformer(), F.cross_entropy, optimizer), majority_tokens(), 160, 16)

    found = run(5e-2)
    assert [f.problem for f in found] == ["lr_too_high"], [f.headline for f in found]
    assert found[0].evidence["update_ratio"] > 1e-2 and "Lower the learning rate" in found[0].advice
    assert run(1e-3) == []
