"""AdaptiveGradClip: the applied gradient against a transcription of AutoClip, refusals, warnings, state."""

from __future__ import annotations

import math
import pickle
import warnings
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies import DeepSpeedStrategy

from lightning_recipes.callbacks import AdaptiveGradClip, GradNormMonitor, adaptive_grad_clip
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)
from tests.callbacks._shared import AppliedGradient

LR = 0.1


class PreClip(Callback):
    """Placed before the clipper: the full gradient and its norm as the clipper receives them."""

    def __init__(self) -> None:
        self.norms: list[float] = []
        self.grads: list[torch.Tensor] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        flat = torch.cat([p.grad.flatten() for p in pl_module.parameters()]).clone()
        self.grads.append(flat)
        self.norms.append(float(flat.double().norm()))


def autoclip_thresholds(norms, percentile, window, warmup_steps, max_norm):
    """AutoClip (Seetharaman et al. 2020), transcribed: append the norm, clip at the percentile of the
    history; here the history is the last `window` norms, and clipping starts after `warmup_steps` steps."""
    thresholds = []
    for t in range(len(norms)):
        history = norms[max(0, t + 1 - window) : t + 1]
        threshold = float(np.percentile(history, percentile)) if t + 1 > warmup_steps else math.inf
        if max_norm is not None:
            threshold = min(threshold, max_norm)
        thresholds.append(threshold)
    return thresholds


@pytest.mark.parametrize(
    ("percentile", "window", "warmup_steps", "max_norm", "accumulate", "precision", "monitor_first"),
    [
        (50.0, 5, 3, None, 1, "32-true", False),
        (50.0, 5, 3, None, 1, "32-true", True),
        (90.0, 1000, 0, None, 1, "32-true", False),
        (75.0, 4, 6, 0.2, 2, "bf16-mixed", True),
    ],
)
def test_applied_gradient_matches_autoclip(
    tmp_path, monkeypatch, percentile, window, warmup_steps, max_norm, accumulate, precision, monitor_first
):
    own_norms, original = [], adaptive_grad_clip.distributed_total_norm
    counting = lambda *a, **k: own_norms.append(1) or original(*a, **k)  # noqa: E731
    monkeypatch.setattr(adaptive_grad_clip, "distributed_total_norm", counting)
    pre, applied, logger = PreClip(), AppliedGradient(LR), InMemoryLogger()
    clip = AdaptiveGradClip(percentile, window, warmup_steps=warmup_steps, max_norm=max_norm)
    callbacks = [pre, GradNormMonitor(), clip, applied] if monitor_first else [pre, clip, applied]
    settings = {"max_steps": 12, "log_every_n_steps": 1, "precision": precision, "default_root_dir": tmp_path}
    trainer = fast_trainer(logger=logger, accumulate_grad_batches=accumulate, callbacks=callbacks, **settings)
    loader = random_classification_loader(num_samples=12 * 16 * accumulate, batch_size=16)
    trainer.fit(TinyClassifier(lr=LR, hidden=64), loader)
    thresholds = autoclip_thresholds(pre.norms, percentile, window, warmup_steps, max_norm)
    expected = [min(n, t) for n, t in zip(pre.norms, thresholds)]
    np.testing.assert_allclose(applied.norms, expected, rtol=2e-3)
    assert sum(e < n * 0.999 for e, n in zip(expected, pre.norms)) >= 2, "the case never clips: a weak test"
    for before, after in zip(pre.grads, applied.grads):  # scaled, never rotated
        assert float(torch.nn.functional.cosine_similarity(before, after, dim=0)) > 1 - 1e-4
    np.testing.assert_allclose(logger.values("grad_clip/threshold"), thresholds, rtol=1e-5)
    clipped = [float(t < n) for n, t in zip(pre.norms, thresholds)]
    assert logger.values("grad_clip/clipped_fraction") == clipped
    # with GradNormMonitor just before it, the clipper reuses its norm instead of reading the gradients again
    assert len(own_norms) == (0 if monitor_first else 12)


def test_refuses_the_trainer_gradient_clip_val(tmp_path):
    settings = {"gradient_clip_val": 1.0, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_steps=1, callbacks=[AdaptiveGradClip()], **settings)
    with pytest.raises(ValueError, match=r"gradient_clip_val=1\.0.*clip twice"):
        trainer.fit(TinyClassifier(), random_classification_loader())


def test_refuses_deepspeed_with_the_config_to_use_instead():
    trainer = pl.Trainer(accelerator="cpu", devices=1, strategy=DeepSpeedStrategy(stage=2), logger=False)
    with pytest.raises(ValueError, match="`gradient_clipping` in the DeepSpeed config"):
        AdaptiveGradClip().setup(trainer, TinyClassifier(), "fit")


def test_lightning_fsdp1_norm_clipping_refuses_where_ours_applies():
    """Lightning's FSDP1 precision plugin refuses norm clipping (#19235); FSDP2: the subprocess test."""
    from lightning.pytorch.plugins.precision import FSDPPrecision

    with pytest.raises(Exception, match="gradient_clip_algorithm='norm'"):
        FSDPPrecision("32-true").clip_grad_by_norm(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))]), 1.0)


def _count_clip_warnings(tmp_path, **kwargs) -> int:
    clip = AdaptiveGradClip(percentile=10, window=10, warmup_steps=0, **kwargs)
    trainer = fast_trainer(max_steps=30, log_every_n_steps=5, callbacks=[clip], default_root_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(TinyClassifier(), random_classification_loader(num_samples=30 * 8, batch_size=8))
    return sum("Clipping fires constantly" in str(w.message) for w in caught)


def test_warns_when_clipping_fires_constantly_at_most_once_per_window(tmp_path):
    # percentile 10: ~90% of steps clip; 30 steps, window 10 -> at steps 10, 20, 30 at most
    assert 2 <= _count_clip_warnings(tmp_path) <= 3
    assert _count_clip_warnings(tmp_path, warn_clipped_fraction=None) == 0


class InjectInf(Callback):
    """Before the clipper: put an ``inf`` into one gradient at step 3 (an fp16 overflow)."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if trainer.global_step == 3:
            pl_module.head.bias.grad[0] = math.inf


class SkipNonfinite(Callback):
    """After the clipper: zero non-finite gradients, as an AMP scaler would skip the step."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        grads = [p.grad for p in pl_module.parameters()]
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            for g in grads:
                g.zero_()


def test_a_nonfinite_norm_is_neither_recorded_nor_clipped(tmp_path):
    pre, post = PreClip(), PreClip()
    clip = AdaptiveGradClip(percentile=50, window=8, warmup_steps=0)
    callbacks = [InjectInf(), pre, clip, post, SkipNonfinite()]
    trainer = fast_trainer(max_steps=6, callbacks=callbacks, default_root_dir=tmp_path)
    trainer.fit(TinyClassifier(), random_classification_loader())
    assert math.isinf(pre.norms[3])
    assert torch.equal(pre.grads[3], post.grads[3]), "gradients of a non-finite step must be left untouched"
    state = clip.state_dict()["states"][0]
    assert math.isnan(float(state["history"][3])) and torch.isfinite(state["history"][[0, 1, 2, 4, 5]]).all()
    assert all(math.isfinite(n) for n in post.norms[4:])


class CheckRestored(Callback):
    def __init__(self, clip: AdaptiveGradClip, expected: dict) -> None:
        self.clip, self.expected, self.checked = clip, expected, False

    def on_train_start(self, trainer, pl_module):
        got = self.clip.state_dict()["states"][0]
        want = self.expected["states"][0]
        assert torch.equal(got["history"].nan_to_num(-1), want["history"].nan_to_num(-1))
        assert (got["position"], got["steps"]) == (want["position"], want["steps"])
        self.checked = True


def test_state_dict_round_trip_resume_and_pickle(tmp_path):
    clip = AdaptiveGradClip(percentile=50, window=6, warmup_steps=2)
    first = fast_trainer(max_steps=4, callbacks=[clip], enable_checkpointing=True, default_root_dir=tmp_path)
    first.fit(TinyClassifier(), random_classification_loader(num_samples=128))
    saved = clip.state_dict()
    assert saved["states"][0]["steps"] == 4 and saved["states"][0]["position"] == 4

    clone = AdaptiveGradClip(percentile=50, window=6, warmup_steps=2)
    path = tmp_path / "state.pt"
    torch.save(saved, path)
    clone.load_state_dict(torch.load(path))
    assert clone.state_dict()["states"][0]["steps"] == 4
    norm = torch.tensor(3.0)
    assert torch.equal(clip._states[0].step(norm, clip), clone._states[0].step(norm, clone))
    pickle.loads(pickle.dumps(clone))
    AdaptiveGradClip().load_state_dict({})  # a foreign checkpoint loads

    smaller = AdaptiveGradClip(percentile=50, window=3)
    smaller.load_state_dict(saved)  # keeps the newest 3 norms, oldest first
    history = saved["states"][0]["history"]
    assert torch.equal(smaller.state_dict()["states"][0]["history"], history[1:4])

    ckpt = next(Path(tmp_path).rglob("*.ckpt"))
    resumed = AdaptiveGradClip(percentile=50, window=6, warmup_steps=2)
    probe = CheckRestored(resumed, saved)
    second = fast_trainer(max_steps=6, max_epochs=3, callbacks=[resumed, probe], default_root_dir=tmp_path)
    second.fit(TinyClassifier(), random_classification_loader(num_samples=128), ckpt_path=ckpt)
    assert probe.checked
    assert resumed.state_dict()["states"][0]["steps"] == second.global_step


NAN, INF = math.nan, math.inf
ONE_TO_FOUR = [1.0, 2.0, 3.0, 4.0, NAN, NAN]  # NaN: empty slots of the ring buffer


@pytest.mark.parametrize(
    ("history", "norm", "percentile", "clipping", "max_norm", "threshold", "factor"),
    [
        # median of 1..4 by linear interpolation: 2.5; a norm of 4 is scaled to 2.5
        (ONE_TO_FOUR, 4.0, 50.0, True, None, 2.5, 2.5 / 4.0),
        (ONE_TO_FOUR, 2.0, 50.0, True, None, 2.5, 1.0),  # below the threshold: untouched
        (ONE_TO_FOUR, 4.0, 100.0, True, None, 4.0, 1.0),  # the maximum: equal is not clipped
        ([float(i) for i in range(1, 11)], 10.0, 90.0, True, None, 9.1, 9.1 / 10.0),  # 9 + 0.1 * (10 - 9)
        (ONE_TO_FOUR, 4.0, 50.0, False, None, INF, 1.0),  # warm-up: no percentile clipping
        (ONE_TO_FOUR, 4.0, 50.0, False, 2.0, 2.0, 0.5),  # warm-up: the cap still applies
        (ONE_TO_FOUR, 4.0, 50.0, True, 3.0, 2.5, 2.5 / 4.0),  # the lower of percentile and cap
        (ONE_TO_FOUR, 4.0, 50.0, True, 2.0, 2.0, 0.5),
        ([NAN] * 4, 4.0, 50.0, True, None, INF, 1.0),  # nothing recorded: no threshold
        (ONE_TO_FOUR, INF, 50.0, True, None, 2.5, 1.0),  # non-finite norm: never clipped
        (ONE_TO_FOUR, NAN, 50.0, True, 1.0, 1.0, 1.0),
    ],
)
def test_autoclip_factor_value_table(history, norm, percentile, clipping, max_norm, threshold, factor):
    history, norm = torch.tensor(history), torch.tensor(norm)
    options = {"clipping": clipping, "max_norm": max_norm}
    got_threshold, got_factor = adaptive_grad_clip.autoclip_factor(history, norm, percentile, **options)
    assert got_threshold.item() == pytest.approx(threshold, rel=1e-6)
    assert got_factor.item() == pytest.approx(factor, rel=1e-6)
