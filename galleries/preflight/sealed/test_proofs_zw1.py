"""Proofs for sealed gallery ZW1's first half (``zw1``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zw1_data as d
from galleries.preflight.sealed import _zw1_models as m
from galleries.preflight.sealed import zw1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def flow_error(model) -> float:
    """The mean end-point error (pixels) of the served displacement on 2,000 held-out frame pairs."""
    frames, shift = d.frame_pairs(2000, 3)
    return (model.predict(frames) - shift).norm(dim=-1).mean().item()


@torch.no_grad()
def sudoku_error(model) -> float:
    """The share of blank cells filled with a wrong digit, over 2,000 held-out puzzles."""
    puzzle, solution = d.puzzles(2000, 3)
    blank = puzzle == 0
    return (model.predict(puzzle) != solution)[blank].float().mean().item()


@torch.no_grad()
def rain_error(model) -> float:
    """The mean squared error (mm^2) of the served expected rainfall against the true one, P(rain) x mean
    wet-day amount, on 5,000 held-out days."""
    x, _ = d.rainfall(5000, 3)
    p, mean = d.rain_truth(x)
    return (model.predict(x) - p * mean).pow(2).mean().item()


@torch.no_grad()
def captcha_error(model) -> float:
    """The share of 1,000 held-out captchas (of the held-out digits) read wrong in any position."""
    image, chars = d.captchas(1000, 3, "test")
    return (model.predict(image) != chars).any(-1).float().mean().item()


@torch.no_grad()
def option_error(model) -> float:
    """The mean absolute error of the served call price on 4,000 held-out options."""
    x, price = d.calls(4000, 3)
    return (model.predict(x) - price).abs().mean().item()


FLOW, SUDOKU = (m.FlowNet, gallery.flow_data), (m.SudokuNet, gallery.sudoku_data)
RAIN, CAPTCHA = (m.Hurdle, gallery.rain_data), (m.CaptchaNet, gallery.captcha_data)
OPTION, PARITY = (m.OptionNet, gallery.option_data), (m.OptionNet, gallery.parity_data)
FLOW_FLIP = (m.FlowNet, gallery.HEALTHY[0].data)
SUDOKU_BLANKS = (m.SudokuNetBlanksOnly, gallery.sudoku_data)
CAPTCHA_EMA = (m.CaptchaNetEMA, gallery.captcha_data)
MONOTONE = (m.OptionNetMonotone, gallery.option_data)

PROOFS = {
    "flow_flip_keeps_dx": Proof(FLOW_FLIP, flow_error, 0.1, 6),
    "flow_frames_greyscaled": Proof(FLOW, flow_error, 0.3, 6),
    "sudoku_loss_on_givens": Proof(SUDOKU_BLANKS, sudoku_error, 0.02, 8),
    "sudoku_relabel_puzzle_only": Proof(SUDOKU, sudoku_error, 0.2, 8),
    "sudoku_target_mod4": Proof(SUDOKU, sudoku_error, 0.5, 8),
    "rain_double_sigmoid": Proof(RAIN, rain_error, 0.3, 8),
    "rain_amount_on_dry_days": Proof(RAIN, rain_error, 0.3, 8),
    "rain_balanced_sampler_uncorrected": Proof(RAIN, rain_error, 0.3, 8),
    "captcha_heads_share_one_layer": Proof(CAPTCHA, captcha_error, 0.3, 8),
    "captcha_none_ignored": Proof(CAPTCHA, captcha_error, 0.2, 8),
    "captcha_ema_updated_per_epoch": Proof(CAPTCHA_EMA, captcha_error, 0.3, 8),
    "option_optimizer_on_head_only": Proof(OPTION, option_error, 0.2, 8),
    "option_parity_strike_compounded": Proof(PARITY, option_error, 0.5, 8),
    "option_monotone_penalty_sign": Proof(MONOTONE, option_error, 0.2, 8),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
