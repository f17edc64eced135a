"""Schedules against Hugging Face's own functions (``transformers.optimization``), step by step."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.optim import warmup_constant, warmup_cosine, warmup_linear, warmup_stable_decay

hf = pytest.importorskip("transformers.optimization", reason="the parity tables need `transformers`")


def _optimizer():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def _table(scheduler, steps):
    """The multiplier at every step 0..steps-1, as LambdaLR computes it."""
    return [scheduler.lr_lambdas[0](step) for step in range(steps)]


RUNS = [(0, 1), (0, 10), (1, 10), (3, 20), (10, 100), (7, 37), (25, 25)]


# name -> (ours, theirs, steps compared past the end), each called as (optimizer, warmup, total)
_PAIRS = {
    **{
        f"cosine-{c}-cycles": (
            lambda o, w, t, c=c: warmup_cosine(o, w, t, num_cycles=c),
            lambda o, w, t, c=c: hf.get_cosine_schedule_with_warmup(o, w, t, c),
            1,
        )
        for c in (0.5, 1.5)
    },
    **{
        f"cosine-min-lr-{r}": (
            lambda o, w, t, r=r: warmup_cosine(o, w, t, min_lr_ratio=r),
            lambda o, w, t, r=r: hf.get_cosine_with_min_lr_schedule_with_warmup(o, w, t, min_lr_rate=r),
            1,
        )
        for r in (0.0, 0.1, 0.5, 1.0)
    },
    "linear": (warmup_linear, hf.get_linear_schedule_with_warmup, 5),  # both stay at 0 past the end
    "constant": (
        lambda o, w, t: warmup_constant(o, w),
        lambda o, w, t: hf.get_constant_schedule_with_warmup(o, w),
        5,
    ),
}


@pytest.mark.parametrize(("warmup", "total"), RUNS)
@pytest.mark.parametrize("name", list(_PAIRS))
def test_schedule_equals_its_hugging_face_function(name, warmup, total):
    ours, theirs, past_end = _PAIRS[name]
    steps = total + past_end
    expected = _table(theirs(_optimizer(), warmup, total), steps)
    assert _table(ours(_optimizer(), warmup, total), steps) == pytest.approx(expected, rel=0, abs=1e-15)


@pytest.mark.parametrize(
    ("warmup", "decay", "total"), [(0, 0, 10), (2, 0, 10), (0, 10, 10), (3, 4, 12), (5, 5, 10), (1, 7, 40)]
)
@pytest.mark.parametrize("shape", ["linear", "cosine", "1-sqrt"])
@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5])
def test_wsd_equals_get_wsd_schedule(warmup, decay, total, shape, ratio):
    """Every step, past the end included: warm-up from `min_lr_ratio`; `decay_steps=0` ends at it."""
    shapes = {"decay_shape": shape, "warmup_shape": shape}
    ours = warmup_stable_decay(_optimizer(), warmup, total, decay_steps=decay, min_lr_ratio=ratio, **shapes)
    steps = {"num_warmup_steps": warmup, "num_decay_steps": decay, "num_training_steps": total}
    shapes = {"warmup_type": shape, "decay_type": shape}
    theirs = hf.get_wsd_schedule(_optimizer(), **steps, **shapes, min_lr_ratio=ratio)
    assert _table(ours, total + 5) == pytest.approx(_table(theirs, total + 5), abs=1e-15)


def _hf_warmup_steps(ratio, total):
    """TrainingArguments.get_warmup_steps for a ratio."""
    import dataclasses
    from types import SimpleNamespace

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    with_ratio = "warmup_ratio" in names
    fields = {"warmup_steps": 0, "warmup_ratio": ratio} if with_ratio else {"warmup_steps": ratio}
    return TrainingArguments.get_warmup_steps(SimpleNamespace(**fields), total)


@pytest.mark.parametrize(("ratio", "total"), [(0.05, 30), (0.1, 25), (0.5, 7), (0.01, 1000), (0.3, 11)])
def test_warmup_ratio_rounds_up_as_training_arguments_does(ratio, total):
    ours = _table(warmup_linear(_optimizer(), total_steps=total, warmup_ratio=ratio), total + 1)
    hf_linear = hf.get_linear_schedule_with_warmup(_optimizer(), _hf_warmup_steps(ratio, total), total)
    theirs = _table(hf_linear, total + 1)
    assert ours == pytest.approx(theirs, abs=1e-15)


def test_deliberate_difference_warmup_ratio_ignores_float_noise():
    """100 * 0.07 is 7.000000000000001 in floating point: Hugging Face warms up 8 steps, we warm up 7."""
    from lightning_recipes.optim.schedules import resolve_warmup

    assert resolve_warmup(None, 0.07, 100) == 7
    assert _hf_warmup_steps(0.07, 100) == 8


@pytest.mark.parametrize("num_cycles", [0.5, 0.75])
def test_deliberate_difference_cosine_holds_past_the_end(num_cycles):
    """Hugging Face's cosine climbs back up after `num_training_steps`; ours holds its final value."""
    total, warmup = 10, 2
    ours = warmup_cosine(_optimizer(), warmup, total, num_cycles=num_cycles, min_lr_ratio=0.1)
    cosine = hf.get_cosine_with_min_lr_schedule_with_warmup
    theirs = cosine(_optimizer(), warmup, total, num_cycles=num_cycles, min_lr_rate=0.1)
    end = ours.lr_lambdas[0](total)
    assert end == pytest.approx(theirs.lr_lambdas[0](total), abs=1e-15)
    assert [ours.lr_lambdas[0](s) for s in range(total, total + 8)] == [end] * 8
    assert max(theirs.lr_lambdas[0](s) for s in range(total, total + 8)) > end + 0.1


_SAVE_RELOAD = {
    name: (lambda o, pair=_PAIRS[name]: pair[0](o, 2, 10), lambda o, pair=_PAIRS[name]: pair[1](o, 2, 10))
    for name in ("cosine-0.5-cycles", "linear", "constant")
}
_SAVE_RELOAD["wsd"] = (
    lambda o: warmup_stable_decay(o, 2, 10, decay_steps=3, min_lr_ratio=0.1),
    lambda o: hf.get_wsd_schedule(o, 2, 3, num_training_steps=10, min_lr_ratio=0.1, decay_type="linear"),
)


@pytest.mark.parametrize("name", sorted(_SAVE_RELOAD))
@pytest.mark.parametrize("reload", ["torch_save_weights_only", "pickle"])
def test_save_and_reload_mid_schedule_keeps_hfs_learning_rates(name, reload):
    """transformers' ``ScheduleInitTest`` (``unwrap_and_save_reload_schedule``)."""
    import io
    import pickle

    ours_factory, theirs_factory = _SAVE_RELOAD[name]

    def run(factory, reload_at):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=10.0)
        scheduler = factory(optimizer)
        lrs = []
        for step in range(10):
            lrs.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
            if step == reload_at and reload == "torch_save_weights_only":
                buffer = io.BytesIO()
                torch.save(scheduler.state_dict(), buffer)
                buffer.seek(0)
                scheduler.load_state_dict(torch.load(buffer, weights_only=True))
            elif step == reload_at:
                scheduler = pickle.loads(pickle.dumps(scheduler))
                optimizer = scheduler.optimizer
        return lrs

    uninterrupted = run(ours_factory, reload_at=-1)
    assert run(ours_factory, reload_at=5) == uninterrupted
    assert uninterrupted == pytest.approx(run(theirs_factory, reload_at=-1), abs=1e-12)
