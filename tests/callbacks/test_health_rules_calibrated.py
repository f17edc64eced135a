"""HealthMonitor's calibrated rules by hand: each fed the numbers of a run that must (not) be a finding."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from lightning_recipes.callbacks._health_rules import decide
from lightning_recipes.callbacks._health_window import DEFAULT_THRESHOLDS, CheckData, Decision, History

T = DEFAULT_THRESHOLDS
GROUPS = {"fc1": 4096, "fc1.bias": 64, "fc2": 256}


def _check(
    step: int,
    loss: float,
    ratio: dict[str, float] | float | None = None,
    *,
    std: float = 0.05,
    slope: float = 0.0,
    lr: float = 1e-3,
    family: str = "adaptive",
    validations: list[tuple[int, float, float, float, int]] | None = None,
    planned: float = math.inf,
    count: int = 20,
    **fields: Any,
) -> CheckData:
    data = CheckData(
        step=step, epoch=0, loss_mean=loss, loss_count=count, loss_std=std, planned_steps=planned
    )
    # the slope's standard error for n equispaced points
    data.loss_slope, data.loss_slope_se = slope, std * math.sqrt(12 / count**3)
    if ratio is not None:
        ratios = ratio if isinstance(ratio, dict) else dict.fromkeys(GROUPS, ratio)
        data.grad_sampled = True
        data.grad_total = 1.0
        data.update_ratio = ratios
        data.group_numel = {g: GROUPS.get(g, 100) for g in ratios}
        data.group_lr = dict.fromkeys(ratios, lr)
        data.group_family = dict.fromkeys(ratios, family)
    data.validations = validations or []
    for name, value in fields.items():
        setattr(data, name, value)
    return data


def _run(checks: list[CheckData]) -> list[tuple[int, str]]:
    """Every check's new problems as (step, problem), in order."""
    history, active, found = History(), set(), []
    for data in checks:
        decisions = decide(data, history, dict(T))
        found += [(data.step, p) for p in decisions if p not in active]
        active = set(decisions)
    return found


def _problems(checks: list[CheckData]) -> set[str]:
    return {p for _, p in _run(checks)}


def _decided(checks: list[CheckData]) -> dict[str, Decision]:
    """The last check's decisions, every check decided in order."""
    history, decisions = History(), {}
    for data in checks:
        decisions = decide(data, history, dict(T))
    return decisions


# ---------------------------------------------------------------------------------------------- overfitting


def _val(epoch: int, val: float, train: float, n: int = 2000) -> tuple[int, float, float, float, int]:
    return (epoch, val, train, 0.0, n)  # measured SE 0: the set-size floor decides


@pytest.mark.parametrize(
    ("vals", "trains", "n", "expected"),
    [
        # a significant rise, a gap, three validations: found at the fifth
        ([1.0, 0.8, 0.9, 1.0, 1.1], [1.1, 0.7, 0.5, 0.4, 0.3], 2000, [(50, "overfitting")]),
        # 60 samples: +6% twice is inside the noise (SE ~6.5%), and the run keeps reaching new bests
        ([1.0, 0.9, 0.954, 0.952, 0.85, 0.9, 0.9, 0.8], [0.9 - 0.05 * e for e in range(8)], 60, []),
        # an early bump that recedes
        ([1.0, 0.7, 0.8, 0.84, 0.7, 0.5, 0.4, 0.35], [1.0 - 0.1 * e for e in range(8)], 2000, []),
        # a collapsed run whose training loss is above its validation loss
        ([1.0, 1.2, 1.3, 1.4, 1.4], [1.2, 1.5, 1.45, 1.41, 1.40], 2000, []),
    ],
    ids=["found", "small-set-jitter", "bump-that-recedes", "train-above-val"],
)
def test_overfitting_rule_by_hand(vals: list[float], trains: list[float], n: int, expected: list) -> None:
    rows = [_val(e, v, t, n=n) for e, (v, t) in enumerate(zip(vals, trains))]
    assert _run([_check(10 * (e + 1), row[2], validations=[row]) for e, row in enumerate(rows)]) == expected


def test_a_new_best_in_the_same_check_clears_the_verdict() -> None:
    """Several validations in one check: the verdict is the latest one's."""
    rows = [_val(0, 1.0, 1.1), _val(1, 0.8, 0.7), _val(2, 0.95, 0.5), _val(3, 1.0, 0.4), _val(4, 1.1, 0.3)]
    assert _run([_check(10, 0.5, validations=[*rows, _val(5, 0.7, 0.25)])]) == []
    assert _run([_check(10, 0.5, validations=rows)]) == [(10, "overfitting")]


# ------------------------------------------------------------------------------------------- learning rate


def test_loss_stuck_high_with_huge_updates_is_lr_too_high_not_a_plateau() -> None:
    rng = random.Random(0)
    checks = [_check(20 * (i + 1), 1.38 + rng.gauss(0, 0.01), 0.2, std=0.1, lr=0.5) for i in range(8)]
    found = _run(checks)
    assert found and found[0][1] == "lr_too_high" and "loss_plateau" not in {p for _, p in found}


def test_a_falling_loss_with_large_updates_is_healthy() -> None:
    checks = [_check(20 * (i + 1), 2.0 * 0.9**i, 0.05, std=0.05, slope=-0.005) for i in range(8)]
    assert _run(checks) == []


def test_a_significant_rise_with_large_updates_is_lr_too_high_at_once() -> None:
    checks = [_check(20, 1.0, 0.002), _check(40, 0.8, 0.002), _check(60, 1.3, 0.05)]
    assert _run(checks) == [(60, "lr_too_high")]


def test_tiny_adamw_updates_are_lr_too_low_even_when_a_small_group_moves_more() -> None:
    """AdamW at 1e-6: the biases move 2e-5 (the old median over groups sat above 1e-5), the matrices 8e-7."""
    ratios = {"fc1": 8e-7, "fc1.bias": 2e-5, "fc2": 1e-6}
    checks = [_check(20 * (i + 1), 1.38 - 0.001 * i, ratios, lr=1e-6) for i in range(4)]
    found = _run(checks)
    assert found[0] == (40, "lr_too_low")


def test_an_lr_collapsed_mid_run_is_named_at_the_first_check_after() -> None:
    healthy = [_check(20 * (i + 1), 2.0 * 0.9**i, 2e-3, slope=-0.005) for i in range(5)]
    collapsed = [_check(120 + 20 * i, 1.18 + 0.005 * (-1) ** i, 2e-9, lr=1e-9) for i in range(3)]
    assert _run(healthy + collapsed) == [(120, "lr_too_low")]


def test_an_lr_that_decays_to_a_collapse_over_checks_is_named_when_it_stays_there() -> None:
    """An LR decaying to ~0 is named at its second collapsed check (a cosine's trough is one)."""
    lrs = [1e-3, 5e-4, 1e-4, 1e-5, 1e-6, 1e-9, 1e-9, 1e-9]
    checks = [
        _check(20 * (i + 1), 2.0 * 0.9 ** min(i, 5), 2e-3 * lr / 1e-3, lr=lr, slope=-0.005 if i < 5 else 0.0)
        for i, lr in enumerate(lrs)
    ]
    assert _run(checks)[0][1] == "lr_too_low" and _run(checks)[0][0] > 120


def test_cosine_warm_restarts_troughs_and_restart_bumps_are_no_finding() -> None:
    """Zoo 2's SGD under cosine warm restarts: one-check troughs and bumps."""
    cycle = [(0.154, 0.03, 0.0), (0.0546, 0.01, 0.0), (1.4e-4, 2.5e-5, 0.0)]
    losses = [1.0, 0.74, 0.50, 0.56, 0.54, 0.42, 0.55, 0.46, 0.43, 0.44, 0.44, 0.40, 0.45, 0.44, 0.35]
    checks = []
    for i, loss in enumerate(losses):
        lr, ratio, _ = cycle[i % 3]
        checks.append(_check(20 * (i + 1), loss, ratio, std=0.12, lr=lr, family="sgd", count=20))
    assert _run(checks) == []


def test_an_lr_annealed_to_zero_at_the_end_of_a_planned_run_is_not_too_low() -> None:
    lrs = [1e-3 * 0.5 * (1 + math.cos(math.pi * s / 200)) for s in range(20, 201, 20)]
    checks = [
        _check(s, max(0.3, 1.2 - 0.3 * i) + 0.002 * (i % 2), max(lr, 1e-12) * 2.0, lr=lr, planned=200)
        for i, (s, lr) in enumerate(zip(range(20, 201, 20), lrs))
    ]
    assert _run(checks) == []


def test_units_killed_while_updates_are_huge_are_named_as_the_lr() -> None:
    checks = [_check(step, 1.3, 0.3, lr=0.5, dead_rows={"fc1": 0.8}) for step in (20, 40)]
    assert _run(checks) == [(40, "lr_too_high")]


def test_units_dead_from_the_start_with_normal_updates_are_dead_units() -> None:
    dead = {"dead_rows": {"fc1": 0.8}}
    checks = [_check(20 * (i + 1), 1.3 * 0.95**i, 2e-3, family="sgd", slope=-0.002, **dead) for i in range(3)]
    assert _run(checks) == [(40, "dead_units")]


# ------------------------------------------------------------------------------------------------- plateau


def test_a_flat_noisy_loss_is_a_plateau_and_the_advice_fits_the_optimizer() -> None:
    rng = random.Random(1)
    decisions = _decided([_check(50 * (i + 1), 1.386 + rng.gauss(0, 0.01), 2e-3, std=0.1) for i in range(7)])
    assert "loss_plateau" in decisions
    assert "AdamW" not in decisions["loss_plateau"][1]  # the run is already on an adaptive optimizer
    sgd = [_check(50 * (i + 1), 1.386 + rng.gauss(0, 0.01), 2e-3, std=0.1, family="sgd") for i in range(7)]
    assert "AdamW" in _decided(sgd)["loss_plateau"][1]


def test_a_noisy_but_falling_loss_is_not_a_plateau() -> None:
    rng = random.Random(2)
    checks = [_check(20 * (i + 1), 1.386 - 0.03 * i + rng.gauss(0, 0.01), 2e-3, std=0.1) for i in range(8)]
    assert _run(checks) == []


def test_a_converged_loss_is_not_a_plateau() -> None:
    checks = [_check(20 * (i + 1), max(0.6, 1.386 - 0.2 * i), 2e-3, std=0.1) for i in range(10)]
    assert _run(checks) == []


def test_vanishing_advice_never_raises_the_lr_when_updates_are_large() -> None:
    history = History(streaks={"vanishing_gradients": 1})
    data = _check(20, 1.0, {"fc1": 1e-7, "fc1.bias": 0.05, "fc2": 0.05})
    data.group_grad_rms = {"fc1": 1e-8, "fc1.bias": 1.0, "fc2": 1.0}
    decisions = decide(data, history, dict(T))
    assert "larger learning rate" not in decisions["vanishing_gradients"][1]


def test_an_lr_cut_1000x_is_named_at_once_even_while_momentum_keeps_the_ratio_up() -> None:
    """StepLR gamma 1e-6 under momentum: the read LR fell 1e6x, named at once."""
    healthy = [_check(20 * (i + 1), 2.0 * 0.9**i, 2e-3, family="sgd", lr=0.1, slope=-0.005) for i in range(4)]
    cut = [_check(100 + 20 * i, 1.3 + 0.005 * (-1) ** i, 1e-4, family="sgd", lr=1e-7) for i in range(3)]
    found = _run(healthy + cut)
    assert found == [(100, "lr_too_low")]  # and it stays the one finding while the LR stays cut
    assert "1e+06x below its peak of 0.1" in _decided(healthy + cut[:1])["lr_too_low"][1]


def test_a_step_decay_of_ten_is_not_a_collapse() -> None:
    healthy = [_check(20 * (i + 1), 2.0 * 0.9**i, 2e-3, family="sgd", lr=0.1, slope=-0.005) for i in range(4)]
    decayed = [
        _check(100 + 20 * i, 1.3 * 0.97**i, 2e-4, family="sgd", lr=0.01, slope=-0.002) for i in range(3)
    ]
    assert _run(healthy + decayed) == []


def test_a_problem_that_flickers_for_one_check_is_one_finding() -> None:
    """The monitor keeps a problem active until it has been absent ``persist_checks`` checks in a row."""
    from lightning_recipes.callbacks._health_rules import settle

    history, active, found = History(), set(), []
    for present in ({"lr_too_low"}, set(), {"lr_too_low"}, {"lr_too_low"}, set(), set(), {"lr_too_low"}):
        active, new = settle(active, present, history, 2)
        found.append(new)
    assert found == [["lr_too_low"], [], [], [], [], [], ["lr_too_low"]]
    assert active == {"lr_too_low"} and "absent:lr_too_low" not in history.streaks  # found anew


# ------------------------------------------------------------- an adaptive LR far too high, its loss falling


def _grown(start: float, growth: float, i: int, checks: int = 6) -> dict[str, float]:
    """The weights' norms at check ``i``, grown linearly to ``growth``x over ``checks`` checks."""
    return {"param_norm_start": start, "param_norm": start * (1 + (growth - 1) * (i + 1) / checks)}


#: Zoo 1's transformer at AdamW 0.05: the loss falls overall but bounces (its falls 2.9, 0.9, 1.6 and 3.4
#: standard errors), as a too-high LR's does; a fit that falls significantly at every check is steady.
BOUNCING = [1.2, 1.154, 1.14, 1.115, 1.061, 1.0]
STEADY = [1.2 - 0.1 * i for i in range(6)]


def _adaptive_run(ratio: float, growth: float, losses: list[float] = BOUNCING) -> list[tuple[int, str]]:
    """AdamW steps of ``ratio`` at 6 checks, the loss at ``losses``, the weights grown to ``growth``x."""
    fit = {"std": 0.05, "slope": -0.006, "lr": 5e-2}
    return _run(
        [_check(16 * (i + 1), loss, ratio, **fit, **_grown(20.0, growth, i)) for i, loss in enumerate(losses)]
    )


def test_an_adaptive_ratio_above_1e2_for_5_checks_with_the_weights_doubled_is_lr_too_high() -> None:
    # Adam steps > 1% of the norm for 5 checks while the weights grow 2.4x: the LR (1.5x, or 5e-3: not)
    found = _adaptive_run(0.02, 2.4)
    assert ("lr_too_high" in {p for _, p in found}) and min(s for s, p in found if p == "lr_too_high") >= 80
    assert all(p != "lr_too_high" for _, p in _adaptive_run(0.02, 1.5))
    assert all(p != "lr_too_high" for _, p in _adaptive_run(5e-3, 2.4))


def test_weights_that_grow_while_the_loss_falls_significantly_at_every_check_are_being_fitted() -> None:
    # the same steps and growth, each check's loss significantly below the last: a fit (zoo 18's character
    # GRU, zoo 16's and zoo 12's warm-ups), not the LR
    assert all(p != "lr_too_high" for _, p in _adaptive_run(0.02, 2.4, STEADY))


def test_large_steps_on_a_flat_loss_are_the_lr_only_when_they_moved_the_weights() -> None:
    # zoo 2's noisy XOR pair: ratios ~4e-2 on a flat loss; grown 3x: the LR; at 1.5x: a saddle
    def run(growth: float) -> set[str]:
        rng = random.Random(1)
        losses = [0.693 + rng.gauss(0, 0.002) for _ in range(6)]
        return _problems(
            [
                _check(20 * (i + 1), x, 0.04, std=0.03, lr=1e-2, **_grown(10.0, growth, i))
                for i, x in enumerate(losses)
            ]
        )

    assert "lr_too_high" in run(3.0)
    assert "lr_too_high" not in run(1.5)


def test_a_tiny_sgd_ratio_is_the_lr_only_while_the_weights_kept_their_scale() -> None:
    # 1e-12 on a flat loss: the LR collapsed; the same after the weights grew 1e6x: not lr_too_low
    def run(growth: float) -> set[str]:
        norms = {"param_norm_start": 5.0, "param_norm": 5.0 * growth, "family": "sgd", "lr": 0.01}
        return _problems([_check(20 * (i + 1), 0.17, 1e-12, **norms) for i in range(4)])

    assert "lr_too_low" in run(1.0) and "lr_too_low" not in run(1e6)


# ------------------------------------------------- issue #35, sealed zoo 2: evidence by general invariants


def test_a_loss_rise_after_the_lr_rose_to_new_ground_is_lr_too_high_at_once() -> None:
    """A rise after an LR above any earlier counts at once; after a restart to the old peak, at 2 checks."""
    lrs = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32]
    losses = [1.0, 0.8, 0.7, 1.0, 1.4, 2.0]
    checks = [
        _check(20 * (i + 1), loss, 0.05, std=0.05, lr=lr) for i, (loss, lr) in enumerate(zip(losses, lrs))
    ]
    assert _run(checks) == [(80, "lr_too_high")]
    lrs = [0.1, 0.05, 1e-4, 0.1, 0.1, 0.1]
    losses = [1.0, 0.8, 0.7, 1.0, 1.1, 1.2]
    ratios = [0.005, 0.003, 1e-5, 0.05, 0.05, 0.05]
    checks = [
        _check(20 * (i + 1), loss, r, std=0.05, lr=lr, family="sgd")
        for i, (loss, lr, r) in enumerate(zip(losses, lrs, ratios))
    ]
    assert _run(checks) == [(100, "lr_too_high")]


def _dead(data: CheckData, fraction: float, norm: float) -> CheckData:
    data.dead, data.param_norm, data.param_norm_start = {"fc1": fraction}, norm, 1.0
    return data


def test_dead_units_in_a_run_that_learns_well_are_no_finding_but_are_when_it_blew_up() -> None:
    """Zoo 2's BCE digits learn with 53% dead units; zoo 1's Adam at 0.3 blew up: the LR killed them."""
    learns = [0.13, 0.014, 0.012, 0.009, 0.013, 0.004]
    ratios = [0.022, 0.013, 0.0098, 0.0145, 0.006, 0.0045]
    checks = [
        _dead(_check(20 * (i + 1), x, r, std=0.02), 0.53, 4.0 + 0.3 * i)
        for i, (x, r) in enumerate(zip(learns, ratios))
    ]
    assert _run(checks) == []
    blown = [4.7, 1.42, 1.52, 1.44, 1.43, 1.40]
    checks = [_dead(_check(20 * (i + 1), x, 0.02, std=0.02), 0.6, 15.0 + i) for i, x in enumerate(blown)]
    assert _run(checks)[0] == (40, "lr_too_high")


def test_saturation_after_lr_too_high_is_its_symptom_not_a_finding() -> None:
    """Zoo 2's tanh MLP at SGD 0.5: the saturated fraction is lr_too_high's evidence."""
    losses = [1.0, 0.8, 1.3] + [1.2 + 0.01 * k for k in range(11)]
    checks = [_check(20 * (i + 1), x, 0.05, std=0.05, family="sgd", lr=0.5) for i, x in enumerate(losses)]
    for data in checks[4:]:
        data.saturated, data.saturation_gain = {"act": 0.9}, {"act": 0.05}
    assert _run(checks) == [(60, "lr_too_high")]
    assert _decided(checks)["lr_too_high"][0]["saturated_fraction"] == {"act": 0.9}  # its evidence


def _records(outlier: bool) -> list[tuple[int, float, int, int, int, float]]:
    records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 3.0) for k in range(20)]
    if outlier:
        records[7] = (7, 3000.0, 7, 5, 0, 999.0)
    return records


def test_a_loss_held_up_by_outlier_batches_is_no_plateau() -> None:
    """Zoo 2's wrong-unit targets: one batch an epoch 1000x too large holds the loss up."""
    losses = [300.0 - 0.05 * i if i % 2 else 5.5 - 0.02 * i for i in range(14)]
    found = _run(
        [
            _check(20 * (i + 1), x, 3e-3, std=2.0, step_records=_records(bool(i % 2)))
            for i, x in enumerate(losses)
        ]
    )
    assert [p for _, p in found] == ["outlier_batches"], found


def test_nonfinite_weights_after_gradients_far_above_the_weights_are_an_explosion() -> None:
    """Zoo 2's ReLU RNN explodes; its pair (Adam with eps 0) is the update alone."""

    def first_check(grads: list[float], norm: float) -> CheckData:
        data = _check(10, 240.0, None)
        data.nonfinite_weights, data.nonfinite_modules, data.loss_nonfinite = ["rnn", "head"], ["rnn"], 8
        data.param_norm, data.param_norm_start, data.grad_sampled = math.nan, norm, True
        data.step_records = [(k, g, k, 0, 0, 1.0) for k, g in enumerate(grads)]
        return data

    exploded = decide(first_check([3330.0, 7210.0], 8.28), History(), dict(T))
    assert sorted(exploded) == ["exploding_gradients", "nonfinite_activations"]
    assert exploded["exploding_gradients"][0]["grad_norm_vs_weights"] > 100
    assert sorted(decide(first_check([0.165], 26.9), History(), dict(T))) == ["nonfinite_activations"]


def test_a_plateau_whose_validation_never_improved_is_not_learning() -> None:
    """Zoo 2's wrong-key regression; its pair without validation stays ``loss_plateau``."""
    rng = random.Random(1)
    losses = [1.107] + [1.07 + rng.gauss(0, 0.03) for _ in range(12)]
    vals = [1.079, 1.076, 1.083, 1.079, 1.082, 1.088, 1.084]

    def checks(with_validation: bool) -> list[CheckData]:
        out = []
        for i, loss in enumerate(losses):
            epoch = (i + 1) // 2
            rows = (
                [(epoch, vals[epoch], loss, 0.01, 500)] if with_validation and i % 2 and epoch < 7 else None
            )
            out.append(_check(20 * (i + 1), loss, 3e-3, std=0.4, validations=rows))
        return out

    found = _run(checks(True))
    assert [p for _, p in found] == ["not_learning"], found
    assert [p for _, p in _run(checks(False))] == ["loss_plateau"]


# ------------------------------------------------- issue #35, sealed zoo 3: attribution by timing


def _blown_up(data: CheckData, lr: float) -> CheckData:
    """The check after an explosion into inf/nan (gradients 6..4e8, weights of norm 15)."""
    data.nonfinite_weights, data.nonfinite_modules, data.loss_nonfinite = ["stem", "head"], ["stem"], 11
    data.param_norm, data.param_norm_start, data.grad_sampled = math.nan, 15.0, True
    data.step_records = [(100 + k, g, k, 0, 0, 1.0) for k, g in enumerate([1.6, 6.1, 12.0, 422.0, 3.9e8])]
    data.group_lr = {"net": lr}
    return data


def test_an_explosion_after_the_lr_rose_above_the_one_it_trained_at_is_lr_too_high() -> None:
    """Zoo 3's LR x20 at step 100 then inf/nan: the LR; at the healthy LR: an explosion."""
    healthy = [_check(20 * (i + 1), 1.0 - 0.1 * i, 2e-3, lr=0.01, family="sgd") for i in range(5)]
    assert _run([*healthy, _blown_up(_check(120, math.nan, None), 0.2)]) == [(120, "lr_too_high")]
    decisions = _decided([*healthy, _blown_up(_check(120, math.nan, None), 0.2)])
    assert decisions["lr_too_high"][0]["lr_vs_healthy"] == pytest.approx(20.0)
    healthy = [_check(20 * (i + 1), 1.0 - 0.1 * i, 2e-3, lr=0.01, family="sgd") for i in range(5)]
    found = _run([*healthy, _blown_up(_check(120, math.nan, None), 0.01)])
    assert sorted(p for _, p in found) == ["exploding_gradients", "nonfinite_activations"]


def test_a_loss_rise_at_the_lr_and_step_size_the_run_trained_at_is_not_the_lr() -> None:
    """Zoo 3's curriculum rise at the steps it learned at; pairs at 0.05 and after a bounce."""
    losses, ratios = (
        [1.06, 1.01, 0.88, 0.73, 0.55, 0.39, 0.26],
        [0.013, 0.015, 0.013, 0.011, 0.008, 0.007, 0.007],
    )
    for rise_ratio, expected in ((0.0106, []), (0.05, [(160, "lr_too_high")])):
        checks = [
            _check(20 * (i + 1), x, r, std=0.05, slope=-0.002, lr=0.002)
            for i, (x, r) in enumerate(zip(losses, ratios))
        ]
        checks.append(_check(160, 0.41, rise_ratio, std=0.05, lr=0.002))
        assert _run(checks) == expected, rise_ratio
    # a loss that already bounced at those steps (rose at the check before): their instability, the LR's
    bounced = [*losses[:-1], 0.45]
    checks = [
        _check(20 * (i + 1), x, r, std=0.05, slope=-0.002, lr=0.002)
        for i, (x, r) in enumerate(zip(bounced, ratios))
    ]
    checks.append(_check(160, 0.60, 0.0106, std=0.05, lr=0.002))
    assert _run(checks) == [(160, "lr_too_high")]


def test_gradient_growth_after_lr_too_high_is_its_symptom_not_a_finding() -> None:
    """Zoo 3's siamese tanh encoder at SGD 2.0; its pair without lr_too_high explodes."""
    losses = [1.0, 0.8, 1.3, 1.25, 1.24]
    checks = [_check(20 * (i + 1), x, 0.05, std=0.05, family="sgd", lr=2.0) for i, x in enumerate(losses)]
    checks[-1].grad_total = 1000.0
    assert _run(checks) == [(60, "lr_too_high")]
    calm = [_check(20 * (i + 1), 1.0 - 0.05 * i, 2e-3, std=0.05, slope=-0.002) for i in range(5)]
    calm[-1].grad_total = 1000.0
    assert _run(calm) == [(100, "exploding_gradients")]


# ------------------------------------------ issue #35, sealed zoo 3: the trivial level, exploding at step 0


def _flat_run(
    losses: list[float], start: float, **fields: float
) -> tuple[list[tuple[int, str]], dict[str, object]]:
    """Checks every 20 steps at the given means; returns the new problems and not_learning's evidence."""
    history, active, found, evidence = History(), set(), [], {}
    for i, loss in enumerate(losses):
        data = _check(20 * (i + 1), loss, 3e-3, std=0.05, count=20, **fields)
        data.loss_head = start if i == 0 else math.nan
        decisions = decide(data, history, dict(T))
        found += [(data.step, p) for p in decisions if p not in active]
        active = set(decisions)
        evidence = decisions["not_learning"][0] if "not_learning" in decisions else evidence
    return found, evidence


def test_a_flat_loss_with_almost_no_parameter_trained_is_not_learning_by_the_freeze() -> None:
    """Zoo 3's CNN frozen but 0.1% of it; its pair, fully trained, is a plateau."""
    rng = random.Random(3)
    losses = [1.0986 + rng.gauss(0, 0.003) for _ in range(10)]
    trained = sum(GROUPS.values())
    found, evidence = _flat_run(losses, 1.0986, model_numel=trained * 1000)
    assert [p for _, p in found] == ["not_learning"], found
    assert evidence["cause"] == "frozen_parameters"
    assert [p for _, p in _flat_run(losses, 1.0986, model_numel=trained)[0]] == ["loss_plateau"]


def test_a_loss_that_left_its_start_for_the_models_input_free_guess_is_not_learning() -> None:
    """Zoo 3's Poisson counts shuffled apart; pairs beating that guess, or at the start level."""
    rng = random.Random(5)
    losses = [0.5 + rng.gauss(0, 0.01) for _ in range(10)]
    free = {"input_free_gap": -0.01, "input_free_gap_se": 0.02, "input_free_loss": 0.5}
    found, evidence = _flat_run(losses, 0.78, **free)
    assert [p for _, p in found] == ["not_learning"], found
    assert "gain over input free guess" in str(evidence["causes"]["labels_do_not_match_inputs"])
    learns = free | {"input_free_gap": 0.2}
    assert [p for _, p in _flat_run(losses, 0.78, **learns)[0]] == []
    at_start = [0.78 + rng.gauss(0, 0.01) for _ in range(10)]
    assert [p for _, p in _flat_run(at_start, 0.78, **free | {"input_free_loss": 0.78})[0]] == [
        "loss_plateau"
    ]


def _first_check(grad_step0: float, grad_now: float, weights: float, start: float) -> CheckData:
    data = _check(20, start, 1e-3)
    data.loss_head, data.param_norm_start, data.param_norm = start, weights, weights
    data.grad_total = grad_now
    data.step_records = [(0, grad_step0, 0, 0, 0, 1.0), (1, grad_now, 1, 0, 0, 1.0)]
    return data


def test_gradients_exploding_from_step_0_are_the_initialisation_not_a_large_loss_scale() -> None:
    """Zoo 3's 10-block residual MLP at step 0; its pair, a summed Poisson NLL, is scale."""
    exploded = decide(_first_check(1.8e8, 1.3e6, 44.6, 2.8e6), History(), dict(T))
    assert sorted(exploded) == ["exploding_gradients"]
    evidence, _ = exploded["exploding_gradients"]
    assert evidence["cause"] == "initialisation" and evidence["loss_sensitivity"] > 100
    assert "learning rate" in exploded["exploding_gradients"][1]  # the advice says it is not the LR
    assert "exploding_gradients" not in decide(_first_check(1500.0, 1400.0, 6.8, 5000.0), History(), dict(T))
    later = History(losses=[1.0], loss_ses=[0.01], loss_steps=[20], grad_totals=[1.0])
    assert "exploding_gradients" not in decide(_first_check(1.8e8, 1.0, 44.6, 2.8e6), later, dict(T))


# ------------------------------------ issue #35, sealed zoo 4: healthy alarms, misdiagnoses, by invariants


def _trained_then_rose(second: tuple[float, float]) -> list[tuple[int, str]]:
    """Zoo 4's curriculum: the loss fell at ratios 5-8e-3, then rose at 0.0103 (``second``: the next)."""
    losses, ratios = [1.16, 0.55, 0.32, 0.21, 0.10], [8e-3, 7.6e-3, 4.8e-3, 5.4e-3, 4.5e-3]
    checks = [_check(20 * (i + 1), x, r, std=0.05, lr=2e-3) for i, (x, r) in enumerate(zip(losses, ratios))]
    checks += [_check(120, 0.56, 0.0103, std=0.05, lr=2e-3), _check(140, second[0], second[1], lr=2e-3)]
    for data in checks:
        data.param_norm_start, data.param_norm = 10.0, 11.0
    return _run(checks)


def test_a_rise_at_the_steps_the_run_trained_at_is_the_lr_only_when_it_persists() -> None:
    """One large sampled step at a rise is no finding; both persisting: lr_too_high."""
    assert _trained_then_rose((0.63, 3.3e-3)) == []
    assert _trained_then_rose((0.70, 0.015)) == [(140, "lr_too_high")]


def _adam_growing(ratios: dict[str, float], growth: list[float], sparse: set[str]) -> set[str]:
    """Adam at 1e-2, the loss falling 82 -> 60 over 6 checks (bouncing, as zoo 1's too-high LR's), the
    weights' norm at ``growth``."""
    numel = {name: 10_000 if name in sparse else 1 for name in ratios}
    fields = {"group_numel": numel, "sparse_groups": set(sparse), "param_norm_start": 10.0}
    fields |= {"std": 8.0, "lr": 1e-2}
    losses = [82.0, 76.0, 74.0, 68.0, 66.0, 60.0]
    return _problems(
        [
            _check(20 * (i + 1), loss, ratios, param_norm=10.0 * g, **fields)
            for i, (loss, g) in enumerate(zip(losses, growth))
        ]
    )


def test_sustained_adam_steps_on_embedding_tables_alone_are_not_the_lr() -> None:
    """Zoo 4's matrix factorisation tables grow; the same steps on dense layers: lr_too_high."""
    growth = [1.1, 1.3, 1.5, 1.7, 1.95, 2.2]
    assert "lr_too_high" not in _adam_growing(
        {"user": 0.015, "item": 0.015, "mean": 3e-3}, growth, {"user", "item"}
    )
    assert "lr_too_high" in _adam_growing({"user": 0.015, "item": 0.015, "mean": 3e-3}, growth, set())


def test_sustained_adam_steps_that_all_point_outward_are_a_scale_being_fitted_not_the_lr() -> None:
    """Zoo 4's head on frozen layers grows outward; steps that cancel: lr_too_high."""
    ratios = [0.048, 0.026, 0.021, 0.0125, 0.0103, 0.0103]
    outward = [2.5, 4.5, 6.8, 9.0, 11.0, 13.1]
    thrown = [1.3, 1.6, 1.8, 2.0, 2.2, 2.4]

    def run(growth: list[float]) -> set[str]:
        fit = {"std": 0.03, "lr": 0.03, "param_norm_start": 1.0}
        losses = [1.37, 1.35, 1.345, 1.325, 1.32, 1.30]  # falling, bouncing (as zoo 1's too-high LR's)
        checks = [
            _check(20 * (i + 1), loss, {"head": r}, param_norm=g, **fit)
            for i, (loss, r, g) in enumerate(zip(losses, ratios, growth))
        ]
        return _problems(checks)

    assert "lr_too_high" not in run(outward)
    assert "lr_too_high" in run(thrown)


def test_a_zero_gradient_is_not_an_lr_too_low_but_a_run_that_is_not_learning() -> None:
    """Zoo 4's rounding recommender: no gradient; its pair at a ratio of 1e-7: lr_too_low."""

    def run(grad: float, ratio: float) -> tuple[list[tuple[int, str]], dict[str, object]]:
        rng = random.Random(2)
        losses = [1.34 + rng.gauss(0, 0.01) for _ in range(10)]
        return _flat_run(losses, 1.37, grad_total=grad, update_ratio=dict.fromkeys(GROUPS, ratio))

    found, evidence = run(0.0, 0.0)
    assert [p for _, p in found] == ["not_learning"] and evidence["cause"] == "no_gradient_signal", found
    assert [p for _, p in run(1.0, 1e-7)[0]] == ["lr_too_low"]


def test_a_small_fall_of_a_hand_written_loss_with_no_known_trivial_level_is_no_finding() -> None:
    """Zoo 4's pinball loss + 25; its pair with a known input-free level: not_learning."""
    losses = [25.4 - 0.3 * (1 - math.exp(-i / 3)) for i in range(10)]
    kept = {"loss_std": 0.006, "param_norm_start": 10.0, "param_norm": 11.4}  # the weights at 1.14x
    assert _flat_run(losses, 25.4, **kept)[0] == []
    free = {"input_free_gap": 0.001, "input_free_gap_se": 0.01, "input_free_loss": 25.1}
    assert "not_learning" in {p for _, p in _flat_run(losses, 25.4, **kept, **free)[0]}


def _dying(dead_now: float, dead_step0: float, input_free: bool) -> set[str]:
    """Zoo 4's deep sets: the head's ReLU layer ``dead_step0`` dead at first, ``dead_now`` at each check."""
    gap = 0.001 if input_free else 0.3
    fields = {"dead": {"rho.1": dead_now, "phi.1": 0.25}, "input_free_gap": gap, "input_free_gap_se": 0.01}
    fields |= {"input_free_loss": 0.9, "std": 0.1}
    first = _check(20, 1.1, 2e-3, loss_head=1.1, dead_start={"rho.1": dead_step0, "phi.1": 0.1}, **fields)
    return _problems(
        [first] + [_check(20 * (i + 1), 1.1, 2e-3, loss_head=math.nan, **fields) for i in (1, 2, 3)]
    )


def test_units_that_died_in_a_model_ignoring_its_inputs_are_its_symptom_not_dead_units() -> None:
    """Units dying in a model at its input-free guess: no dead_units; its pairs: dead_units."""
    assert "dead_units" not in _dying(0.55, 0.34, input_free=True)
    assert "dead_units" in _dying(0.55, 0.34, input_free=False)
    assert "dead_units" in _dying(0.55, 0.6, input_free=True)


def _deep(dead_from: int) -> dict[str, Decision]:
    """Zoo 4's 9-layer ReLU MLP at 0.1 of He's, dead from ``dead_from``: the second check's decisions."""
    names = [f"net.{2 * k}" for k in range(9)]
    dead = {n: (0.59 if k >= dead_from else 0.0) for k, n in enumerate(names[:-1])}
    ratios = {n: 3e-2 * 10.0 ** (k - 8) for k, n in enumerate(names)}
    first = _check(
        20, 0.17, ratios, family="sgd", loss_head=0.4, dead_rows=dead, dead_start=dict.fromkeys(dead, 0.0)
    )
    return _decided(
        [first, _check(40, 0.17, ratios, family="sgd", loss_head=math.nan, dead_rows=dead, dead_start={})]
    )


def test_steps_vanishing_among_living_layers_are_vanishing_gradients_their_later_dead_units_its_symptom() -> (
    None
):
    """Vanishing among living layers; its pair, dead from layer 2: dead_units."""
    decisions = _deep(dead_from=5)
    assert sorted(decisions) == ["vanishing_gradients"], sorted(decisions)
    assert decisions["vanishing_gradients"][0]["dead_fraction"]
    assert "vanishing_gradients" not in _deep(dead_from=1) and "dead_units" in _deep(dead_from=1)


def _nan_at_step_3(lr: float, family: str = "sgd") -> dict[str, Decision]:
    """Zoo 4's U-Net denoiser: an ordinary first gradient, then 31 and 2.5e7, inf/nan from step 3."""
    data = _check(10, 1.5e7, None)
    data.nonfinite_weights, data.nonfinite_modules, data.loss_nonfinite = (
        ["net.inc", "net.out"],
        ["net.inc"],
        7,
    )
    data.param_norm, data.param_norm_start, data.grad_sampled = math.nan, 5.77, True
    data.step_records = [(k, g, k, 0, 0, 1.8) for k, g in enumerate([1.32, 31.4, 2.46e7])]
    data.group_lr, data.group_family = (
        {"net.inc": lr, "net.out": lr},
        dict.fromkeys(["net.inc", "net.out"], family),
    )
    return decide(data, History(), dict(T))


def test_an_sgd_run_whose_first_ordinary_step_was_far_too_large_and_then_blew_up_is_lr_too_high() -> None:
    """SGD at 2.0 moved the weights 0.46 at step 0; pairs at 0.05 and under Adam: no cause."""
    found = _nan_at_step_3(2.0)
    assert sorted(found) == ["lr_too_high"], sorted(found)
    assert (
        found["lr_too_high"][0]["lower_lr_by"] == 46 and "not the initialisation" in found["lr_too_high"][1]
    )
    for lr, family in ((0.05, "sgd"), (2.0, "adaptive")):
        assert sorted(_nan_at_step_3(lr, family)) == ["exploding_gradients", "nonfinite_activations"]


# ------------------------------------------ issue #35, sealed zoo 5: no finding on healthy runs


def test_a_loss_with_a_constant_added_that_fell_early_and_beats_its_input_free_guess_is_learning() -> None:
    """Zoo 5's CORAL loss + log 120 beats its input-free guess; pairs: not_learning or none."""
    rng = random.Random(7)
    losses = [5.29, 5.2, 5.14] + [5.12 - 0.004 * i + rng.gauss(0, 0.003) for i in range(12)]
    informed = {"input_free_gap": 0.25, "input_free_gap_se": 0.04, "input_free_loss": 0.53}
    kept = {"loss_std": 0.03, "param_norm_start": 10.0, "param_norm": 12.0}
    assert _flat_run(losses, 5.33, **kept, **informed)[0] == []
    guess = informed | {"input_free_gap": 0.002, "input_free_gap_se": 0.005}
    assert "not_learning" in {p for _, p in _flat_run(losses, 5.33, **kept, **guess)[0]}
    grown = kept | {"param_norm": 25.0}  # the weights 2.5x: the LR's own evidence, for a loss that fell
    assert "not_learning" not in {p for _, p in _flat_run(losses, 5.33, **grown)[0]}
    stuck = [5.33 - 0.003 * i + rng.gauss(0, 0.002) for i in range(15)]  # never left its start
    assert "not_learning" in {p for _, p in _flat_run(stuck, 5.33, **grown)[0]}


def test_a_plateau_at_a_floor_reached_by_learning_is_no_finding_one_at_the_start_is() -> None:
    """Zoo 5's noisy ordinal levels: a learned floor; pairs at the start or the input-free guess."""
    rng = random.Random(11)
    losses = [0.543, 0.518] + [0.50 + rng.gauss(0, 0.01) for _ in range(12)]
    noisy = {"loss_std": 0.05, "input_free_gap": 0.05, "input_free_gap_se": 0.025, "input_free_loss": 0.55}
    assert _flat_run(losses, 0.564, **noisy)[0] == []
    at_start = [0.564 + rng.gauss(0, 0.003) for _ in range(14)]
    assert [p for _, p in _flat_run(at_start, 0.564, **noisy)[0]] == ["loss_plateau"]
    marginal = noisy | {"input_free_gap": 0.0, "input_free_gap_se": 0.005, "input_free_loss": 0.50}
    assert "not_learning" in {p for _, p in _flat_run(losses, 0.564, **marginal)[0]}


def test_a_group_at_lr_0_with_gradients_is_named_once_it_persists_a_run_annealed_to_0_is_not() -> None:
    """Zoo 5's VAE encoder at LR 0 for 2 checks; pairs: one check, every group at 0."""

    def checks(n: int, decoder_lr: float) -> list[CheckData]:
        ratios = {"enc": 0.0, "dec": 3e-3 if decoder_lr else 0.0}
        groups = {"group_grad_rms": {"enc": 0.01, "dec": 0.05}, "group_lr": {"enc": 0.0, "dec": decoder_lr}}
        groups |= {"group_numel": {"enc": 10_000, "dec": 9_000}, "model_numel": 19_000}
        return [_check(20 * (i + 1), 40.0 - 2 * i, ratios, **groups) for i in range(n)]

    assert _run(checks(2, 1e-3)) == [(40, "lr_too_low")]
    assert _run(checks(1, 1e-3)) == []
    decided = _decided(checks(2, 0.0))  # every ratio 0: the LR rules judge the run, no group is singled out
    assert "frozen_groups" not in decided.get("lr_too_low", ({}, ""))[0]


def test_gradients_exploding_at_step_0_are_the_initialisation_even_once_the_steps_tamed_them() -> None:
    """Zoo 5's hypernetwork, 111x at step 0; its pair has a summed loss's scale."""
    tamed = decide(_first_check(4470.0, 412.0, 40.1, 184.0), History(), dict(T))
    assert tamed["exploding_gradients"][0]["cause"] == "initialisation"
    assert "exploding_gradients" not in decide(_first_check(4470.0, 412.0, 40.1, 9e4), History(), dict(T))


def test_a_flat_start_whose_weights_shrank_toward_zero_is_not_learning_a_saddle_is_a_plateau() -> None:
    """Zoo 5's AdamW at wd 100: weights pulled to zero; grown weights: ``loss_plateau``."""
    rng = random.Random(13)
    losses = [0.55 + rng.gauss(0, 0.004) for _ in range(12)]
    free = {
        "input_free_gap": 3e-4,
        "input_free_gap_se": 3e-5,
        "input_free_loss": 0.55,
        "param_norm_start": 10.0,
    }
    found, evidence = _flat_run(losses, 0.55, **free, param_norm=5.3)
    assert [p for _, p in found] == ["not_learning"] and evidence["cause"] == "weights_pulled_to_zero", found
    for grown in (17.5, 10.0):
        assert [p for _, p in _flat_run(losses, 0.55, **free, param_norm=grown)[0]] == ["loss_plateau"]
