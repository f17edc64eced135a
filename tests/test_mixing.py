"""BatchMixer and mixed_cross_entropy against references written from the Mixup (arXiv:1710.09412) and
CutMix (arXiv:1905.04899, and the authors' train.py) papers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lightning_recipes.losses import mixed_cross_entropy
from lightning_recipes.mixing import BatchMixer, MixDraw, cutmix_box, mix_seed, sample_beta


def _ref_beta(alpha: float, generator: torch.Generator) -> float:
    """Beta(a, a) as X / (X + Y), X, Y ~ Gamma(a, 1) independent (the textbook construction)."""
    x = torch._standard_gamma(torch.tensor([alpha, alpha], dtype=torch.float64), generator=generator)
    return float(x[0]) / (float(x[0]) + float(x[1]))


def _ref_box(lam: float, h: int, w: int, generator: torch.Generator) -> tuple[int, int, int, int]:
    """The authors' `rand_bbox`: cut_rat = sqrt(1 - lam); cut_w = int(W cut_rat); cx ~ U{0..W-1};
    cy ~ U{0..H-1}; bbx1 = clip(cx - cut_w // 2, 0, W) ... (numpy clip)."""
    cut_rat = np.sqrt(1.0 - lam)
    cut_w = int(w * cut_rat)
    cut_h = int(h * cut_rat)
    cx = int(torch.randint(w, (1,), generator=generator)[0])
    cy = int(torch.randint(h, (1,), generator=generator)[0])
    bbx1 = int(np.clip(cx - cut_w // 2, 0, w))
    bby1 = int(np.clip(cy - cut_h // 2, 0, h))
    bbx2 = int(np.clip(cx + cut_w // 2, 0, w))
    bby2 = int(np.clip(cy + cut_h // 2, 0, h))
    return bby1, bby2, bbx1, bbx2


def _ref_draw(mixer_args: dict, index: int, rank: int, n: int, h: int, w: int) -> dict:
    """The documented draw order, from a fresh generator seeded with mix_seed(seed, rank, index)."""
    g = torch.Generator().manual_seed(mix_seed(mixer_args.get("seed", 0), rank, index))
    u = torch.rand(2, dtype=torch.float64, generator=g)
    mix_a, cut_a = mixer_args.get("mixup_alpha", 1.0), mixer_args.get("cutmix_alpha", 0.0)
    if mix_a > 0 and cut_a > 0:
        use_cutmix = float(u[1]) < mixer_args.get("switch_prob", 0.5)
    else:
        use_cutmix = cut_a > 0
    lam = beta = _ref_beta(cut_a if use_cutmix else mix_a, g)
    perm = torch.randperm(n, generator=g)
    applied = float(u[0]) < mixer_args.get("prob", 1.0)
    box = _ref_box(lam, h, w, g) if (applied and use_cutmix) else None
    if box is not None:
        lam = 1.0 - (box[1] - box[0]) * (box[3] - box[2]) / (h * w)  # area actually pasted
    return {"applied": applied, "cutmix": use_cutmix, "lam": lam, "beta": beta, "perm": perm, "box": box}


def _ref_mixup(x: torch.Tensor, y1h: torch.Tensor, lam: float, perm: torch.Tensor):
    xs, ys = [], []
    for i in range(x.shape[0]):
        j = int(perm[i])
        xs.append(lam * x[i] + (1 - lam) * x[j])
        ys.append(lam * y1h[i] + (1 - lam) * y1h[j])
    return torch.stack(xs), torch.stack(ys)


def _ref_cutmix(x: torch.Tensor, y1h: torch.Tensor, lam: float, perm: torch.Tensor, box):
    y1, y2, x1, x2 = box
    h, w = x.shape[-2:]
    mask = torch.zeros(h, w)  # M: 1 inside the box (pixels taken from the partner)
    for r in range(h):
        for c in range(w):
            if y1 <= r < y2 and x1 <= c < x2:
                mask[r, c] = 1.0
    xs, ys = [], []
    for i in range(x.shape[0]):
        j = int(perm[i])
        xs.append((1 - mask) * x[i] + mask * x[j])
        ys.append(lam * y1h[i] + (1 - lam) * y1h[j])
    return torch.stack(xs), torch.stack(ys)


def _ref_soft_ce(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Per sample -sum_c t_c log softmax(z)_c with t = (1 - s) y + s / C, then the mean over samples."""
    n, c = logits.shape
    total = torch.zeros((), dtype=torch.float64)
    for i in range(n):
        z = logits[i].double()
        log_p = z - torch.log(torch.exp(z - z.max()).sum()) - z.max()
        for k in range(c):
            t = (1 - smoothing) * float(target[i, k]) + smoothing / c
            total = total - t * log_p[k]
    return total / n


def test_beta_draw_is_the_gamma_ratio_and_has_the_beta_distribution() -> None:
    from scipy import stats

    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert [sample_beta(0.4, g1) for _ in range(5)] == [_ref_beta(0.4, g2) for _ in range(5)]
    g = torch.Generator().manual_seed(0)
    for alpha in (0.2, 1.0, 2.0):
        draws = [sample_beta(alpha, g) for _ in range(2000)]
        assert stats.kstest(draws, stats.beta(alpha, alpha).cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    ("lam", "h", "w", "seed"), [(0.75, 8, 8, 0), (0.3, 7, 5, 1), (0.95, 6, 9, 2), (0.0, 4, 4, 3)]
)
def test_cutmix_box_matches_the_authors_rand_bbox(lam: float, h: int, w: int, seed: int) -> None:
    for k in range(20):
        box = cutmix_box(lam, h, w, torch.Generator().manual_seed(seed * 100 + k))
        assert box == _ref_box(lam, h, w, torch.Generator().manual_seed(seed * 100 + k))
        y1, y2, x1, x2 = box
        assert 0 <= y1 <= y2 <= h and 0 <= x1 <= x2 <= w


def test_box_clipping_and_area_corrected_lambda() -> None:
    """The doctest's box: centre on the bottom row, clipped to 3 of 4 rows; lam follows the real area."""
    mixer = BatchMixer(mixup_alpha=0.0, cutmix_alpha=1.0, num_classes=2)
    for _ in range(50):
        x = torch.randn(3, 1, 8, 8)
        mixer(x, torch.tensor([0, 1, 1]))
        draw = mixer.last_draw
        assert draw is not None and draw.box is not None
        y1, y2, x1, x2 = draw.box
        assert draw.lam == 1.0 - (y2 - y1) * (x2 - x1) / 64.0
    uncorrected = BatchMixer(mixup_alpha=0.0, cutmix_alpha=1.0, num_classes=2, correct_lam=False)
    uncorrected(torch.randn(3, 1, 8, 8), torch.tensor([0, 1, 1]))
    reference = _ref_draw({"mixup_alpha": 0.0, "cutmix_alpha": 1.0}, 0, 0, 3, 8, 8)
    assert uncorrected.last_draw is not None and uncorrected.last_draw.lam == reference["beta"]
    assert uncorrected.last_draw.box == reference["box"]


@pytest.mark.parametrize(
    "args",
    [
        {"mixup_alpha": 0.4},
        {"mixup_alpha": 0.0, "cutmix_alpha": 1.0},
        {"mixup_alpha": 0.8, "cutmix_alpha": 1.0, "switch_prob": 0.5, "seed": 7},
        {"mixup_alpha": 1.0, "cutmix_alpha": 1.0, "prob": 0.5, "seed": 11},
    ],
)
def test_mixed_batches_match_the_papers_step_by_step(args: dict) -> None:
    n, c, h, w, classes = 6, 2, 5, 7, 4
    mixer = BatchMixer(num_classes=classes, **args)
    seen = set()
    for index in range(12):
        x = torch.randn(n, c, h, w)
        y = torch.randint(classes, (n,))
        mixed, soft = mixer(x, y)
        ref = _ref_draw(args, index, 0, n, h, w)
        y1h = F.one_hot(y, classes).float()
        draw = mixer.last_draw
        assert draw is not None and draw.index == index and draw.applied == ref["applied"]
        if not ref["applied"]:
            assert mixed is x and torch.equal(soft, y1h) and draw.mode == "none"
            seen.add("none")
            continue
        assert draw.lam == ref["lam"] and torch.equal(draw.permutation, ref["perm"])
        assert draw.box == ref["box"]
        if ref["cutmix"]:
            x_ref, y_ref = _ref_cutmix(x, y1h, ref["lam"], ref["perm"], ref["box"])
        else:
            x_ref, y_ref = _ref_mixup(x, y1h, ref["lam"], ref["perm"])
        seen.add(draw.mode)
        torch.testing.assert_close(mixed, x_ref, rtol=0, atol=1e-6)
        torch.testing.assert_close(soft, y_ref, rtol=0, atol=1e-6)
        torch.testing.assert_close(soft.sum(1), torch.ones(n))
    if args.get("cutmix_alpha", 0) and args.get("mixup_alpha", 1.0):
        assert {"mixup", "cutmix"} <= seen


def test_switch_and_apply_probabilities() -> None:
    mixer = BatchMixer(mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.7, switch_prob=0.25, num_classes=2)
    modes = []
    for _ in range(2000):
        mixer.draw(4, 4, 4)
        assert mixer.last_draw is not None
        modes.append(mixer.last_draw.mode)
    applied = [m for m in modes if m != "none"]
    assert abs(len(applied) / 2000 - 0.7) < 0.04
    assert abs(applied.count("cutmix") / len(applied) - 0.25) < 0.04


def test_soft_and_dict_batches_and_inputs_untouched() -> None:
    mixer = BatchMixer(mixup_alpha=0.5, seed=1, input_key="image", target_key="label")
    x = torch.randn(4, 3)
    x_before = x.clone()
    y = torch.softmax(torch.randn(4, 5), 1)
    out = mixer.mix_batch({"image": x, "label": y, "id": 3})
    draw = mixer.last_draw
    assert isinstance(draw, MixDraw) and out["id"] == 3 and torch.equal(x, x_before)
    x_ref, y_ref = _ref_mixup(x, y, draw.lam, draw.permutation)
    torch.testing.assert_close(out["image"], x_ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(out["label"], y_ref, rtol=0, atol=1e-6)
    assert isinstance(BatchMixer(num_classes=2).mix_batch((x, torch.tensor([0, 1, 0, 1]))), tuple)


def test_rank_streams_independent_by_default_and_shared_when_synced() -> None:
    def lams(sync: bool, rank: int) -> list[float]:
        mixer = BatchMixer(mixup_alpha=1.0, sync_across_ranks=sync)
        mixer.rank = rank
        return [mixer.draw(8).lam for _ in range(4)]

    assert lams(False, 0) != lams(False, 1)
    assert lams(True, 0) == lams(True, 1) == lams(False, 0)


def test_state_dict_round_trip_continues_the_stream() -> None:
    a = BatchMixer(mixup_alpha=1.0, cutmix_alpha=1.0, seed=5, num_classes=3)
    for _ in range(3):
        a.draw(5, 6, 6)
    b = BatchMixer(mixup_alpha=1.0, cutmix_alpha=1.0, seed=5, num_classes=3)
    b.load_state_dict(a.state_dict())
    for _ in range(3):
        da, db = a.draw(5, 6, 6), b.draw(5, 6, 6)
        assert (da.index, da.lam, da.box, da.mode) == (db.index, db.lam, db.box, db.mode)
        assert torch.equal(da.permutation, db.permutation)
    b.load_state_dict({})  # tolerant of old / empty states
    assert b.num_batches == 0


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_mixed_cross_entropy_against_the_formula_and_timms_order(smoothing: float) -> None:
    torch.manual_seed(0)
    logits = torch.randn(5, 4)
    y_a, y_b = torch.tensor([0, 1, 2, 3, 0]), torch.tensor([1, 1, 0, 2, 3])
    lam = 0.3
    soft = lam * F.one_hot(y_a, 4).float() + (1 - lam) * F.one_hot(y_b, 4).float()
    ours = mixed_cross_entropy(logits, soft, label_smoothing=smoothing)
    assert math.isclose(float(ours), float(_ref_soft_ce(logits, soft, smoothing)), rel_tol=1e-6)
    # timm's order: smooth each one-hot (off = s/C, on = 1 - s + s/C), then mix
    off, on = smoothing / 4, 1 - smoothing + smoothing / 4
    smooth_a = F.one_hot(y_a, 4).float() * (on - off) + off
    smooth_b = F.one_hot(y_b, 4).float() * (on - off) + off
    timm_target = lam * smooth_a + (1 - lam) * smooth_b
    timm_loss = (-timm_target * F.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(ours, timm_loss)
    hard = mixed_cross_entropy(logits, y_a, label_smoothing=smoothing)
    torch.testing.assert_close(hard, F.cross_entropy(logits, y_a, label_smoothing=smoothing))
    one_hot = mixed_cross_entropy(logits, F.one_hot(y_a, 4).float(), label_smoothing=smoothing)
    torch.testing.assert_close(one_hot, hard)
    per_sample = mixed_cross_entropy(logits, soft, label_smoothing=smoothing, reduction="none")
    summed = mixed_cross_entropy(logits, soft, label_smoothing=smoothing, reduction="sum")
    assert per_sample.shape == (5,) and torch.allclose(per_sample.sum(), summed)


def test_call_time_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="needs `num_classes`"):
        BatchMixer()(torch.randn(2, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="CutMix needs inputs shaped"):
        BatchMixer(cutmix_alpha=1.0, num_classes=2)(torch.randn(2, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="floating-point"):
        BatchMixer(num_classes=2)(torch.ones(2, 3, dtype=torch.long), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="`label_smoothing`"):
        mixed_cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="soft `targets` must have the logits' shape"):
        mixed_cross_entropy(torch.randn(2, 3), torch.rand(2, 4))


def test_mixer_pickles_and_dumps_to_yaml_as_its_settings(tmp_path) -> None:
    """A mixer given to `__init__`: hparams.yaml is a mapping, the checkpoint loads weights_only."""
    import pickle

    import yaml
    from lightning.pytorch.core.saving import load_hparams_from_yaml, save_hparams_to_yaml

    mixer = BatchMixer(mixup_alpha=0.4, cutmix_alpha=1.0, num_classes=5, seed=9, input_key="x")
    mixer.draw(4, 4, 4)
    save_hparams_to_yaml(tmp_path / "hparams.yaml", {"batch_mixer": mixer})
    loaded = load_hparams_from_yaml(tmp_path / "hparams.yaml")["batch_mixer"]
    assert loaded == mixer.to_dict() and BatchMixer(**loaded).to_dict() == mixer.to_dict()
    assert yaml.safe_load(yaml.safe_dump({"m": mixer}))["m"]["cutmix_alpha"] == 1.0
    torch.save({"hyper_parameters": {"batch_mixer": mixer}}, tmp_path / "m.pt")
    back = torch.load(tmp_path / "m.pt", weights_only=True)["hyper_parameters"]["batch_mixer"]
    copy = pickle.loads(pickle.dumps(mixer))
    expected = mixer.draw(4, 4, 4)  # the second draw of the stream
    for other in (back, copy):
        assert other.to_dict() == mixer.to_dict() and other.num_batches == 1
        again = other.draw(4, 4, 4)
        assert (again.index, again.lam, again.box) == (expected.index, expected.lam, expected.box)
