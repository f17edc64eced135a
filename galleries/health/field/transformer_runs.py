"""The field gallery's ``transformers`` runs: a 2-layer GPT-2 (width 32) on a Markov-chain next-token task
and a 2-layer BERT classifier (width 32) on a synthetic sentiment task, both random init from small configs.

LRs found by a sweep of AdamW (seed 0, constant LR), before any monitor ran:

- GPT-2, 200 steps, batch 32: 1e-3 -> 1.47, 3e-3 -> 1.14, **1e-2 -> 1.10** (the good LR), 3e-2 -> 1.11,
  5e-2 -> 1.22, 1e-1 -> 3.27 (stuck; ln 64 = 4.16 at the start, the chain's entropy 1.08).
- BERT, 150 steps, batch 32: 3e-4 -> 0.38 (a plateau at ln 2 until step ~100), **1e-3 -> 0.32** (the good
  LR; the 10% label noise puts the floor at 0.33), 3e-3 -> 0.69 (seed 0; 0.28-0.33 on seeds 1-3), 1e-2 -> 0.69
  (seed 0: never leaves chance), 0.66 (seed 3: learns to 0.37, thrown back to chance), 0.63 (seed 1), 0.31
  (seed 2: the one seed of four that trains).

At 10x the update-to-weight ratio is huge only at first: median over parameters 5e-2 (GPT-2) and 1.2e-1 (BERT)
in steps 0-20, against 7e-2 and 2e-2 at the good LR; after step 20 it is ~1e-2 (GPT-2) and 3e-3-1.5e-2 (BERT),
no larger than the good LR's (1.5-2.7e-2). What marks them later is the loss stuck far above the good LR's.

Every problem's proof compares the run with its good-LR twin (the same seed and data at the good LR), run once
per process and cached.

Example:
    >>> sorted({str(case.expected) for case in CASES})
    ['None', 'lr_too_high', 'lr_too_low', 'overfitting']
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics

from torch.utils.data import DataLoader

from galleries.health.field._case import Build, FieldCase, PlainRecorder, run_case
from galleries.health.field._transformer_models import (
    SUCCESSOR_PROBS,
    VOCAB,
    TinyGPT2LM,
    ValidatedBert,
    markov_text,
)
from tests.helpers.finetune_models import TinyBertFinetune, loader, text_classification

GPT2_GOOD_LR, GPT2_STEPS = 1e-2, 200
BERT_GOOD_LR, BERT_STEPS = 1e-3, 150
CHAIN_ENTROPY = -sum(p * math.log(p) for p in SUCCESSOR_PROBS)  # ~1.08: the best next-token loss
LABEL_NOISE_ENTROPY = -(0.1 * math.log(0.1) + 0.9 * math.log(0.9))  # ~0.33: the best classification loss


def _mean(values: list[float]) -> float:
    return statistics.fmean(values)


def _median_update_ratio(recorder: PlainRecorder) -> float:
    """The run's median over steps of the step's median update-to-weight ratio over parameters."""
    return statistics.median(statistics.median(step.values()) for step in recorder.update_ratios)


# ------------------------------------------------------------------------------------------------ GPT-2


def _gpt2(lr: float, **schedule: float | str) -> Build:
    def build() -> tuple[TinyGPT2LM, DataLoader, DataLoader | None]:
        return TinyGPT2LM(lr=lr, **schedule), loader(markov_text(2048), 32), None  # type: ignore[arg-type]

    return build


@functools.lru_cache(maxsize=1)
def gpt2_good_lr_twin() -> PlainRecorder:
    """GPT-2 at its good LR, constant, seed 0, 200 steps: the twin of the GPT-2 problems."""
    twin = FieldCase("gpt2_twin", _gpt2(GPT2_GOOD_LR), None, 0, lambda r: None, max_steps=GPT2_STEPS)
    return run_case(twin, monitor=False)[1]


def _prove_gpt2_lr_too_high(recorder: PlainRecorder) -> None:
    losses, twin = recorder.losses, gpt2_good_lr_twin().losses
    assert len(losses) == GPT2_STEPS
    assert _mean(twin[-20:]) < CHAIN_ENTROPY + 0.15  # at the good LR it nearly reaches the chain's entropy
    assert _mean(losses[-50:]) > 2.5 * CHAIN_ENTROPY  # at 10x it stays far above it ...
    assert _mean(losses[-50:]) > 2.5 * _mean(twin[-50:])  # ... and far above its twin
    assert _mean(losses[150:]) > 0.95 * _mean(losses[100:150])  # stuck: the second half no longer improves


def _prove_gpt2_lr_too_low(recorder: PlainRecorder) -> None:
    losses, twin = recorder.losses, gpt2_good_lr_twin()
    assert len(losses) == GPT2_STEPS
    assert _mean(losses[-20:]) > 0.99 * _mean(losses[:5])  # 200 steps move the loss by less than 1%
    assert _mean(losses[-20:]) > 0.99 * math.log(VOCAB)  # still at chance
    assert _mean(twin.losses[-20:]) < 0.35 * _mean(twin.losses[:5])  # the good LR cuts it by 65%+
    assert _median_update_ratio(recorder) < 0.01 * _median_update_ratio(twin)  # updates 100x+ smaller


COLLAPSE_STEP = 40


def _prove_gpt2_lr_collapse(recorder: PlainRecorder) -> None:
    losses, twin, lrs = recorder.losses, gpt2_good_lr_twin().losses, recorder.lrs
    assert len(losses) == GPT2_STEPS
    assert lrs[COLLAPSE_STEP - 1][0] == GPT2_GOOD_LR and lrs[COLLAPSE_STEP][0] < 1e-6 * GPT2_GOOD_LR * 1.01
    assert _mean(losses[20:40]) < 0.8 * _mean(losses[:20])  # it was still learning fast before the collapse
    assert _mean(losses[30:40]) > CHAIN_ENTROPY + 0.3  # ... far from done
    assert _mean(losses[180:]) > 0.97 * _mean(losses[40:60])  # after it: 140 steps without progress
    assert _mean(twin[180:]) < 0.8 * _mean(losses[180:])  # while the run without the collapse went on


def _prove_gpt2_warmup_cosine_trains(recorder: PlainRecorder) -> None:
    losses, lrs = recorder.losses, recorder.lrs
    assert len(losses) == GPT2_STEPS
    assert max(lr[0] for lr in lrs) <= GPT2_GOOD_LR  # warm-up to the good LR ...
    assert lrs[20][0] > 0.99 * GPT2_GOOD_LR
    assert lrs[-1][0] < 0.01 * GPT2_GOOD_LR  # cosine to ~0
    assert _mean(losses[-20:]) < CHAIN_ENTROPY + 0.15  # near the chain's entropy (from ln 64 = 4.16)
    assert _mean(losses[-20:]) < _mean(losses[80:100])  # still improving in the second half


def _gpt2_with_validation() -> tuple[TinyGPT2LM, DataLoader, DataLoader | None]:
    held_out = DataLoader(markov_text(128, seed=1), batch_size=128)
    return TinyGPT2LM(lr=3e-3), loader(markov_text(1024), 32), held_out


def _prove_gpt2_validated_trains(recorder: PlainRecorder) -> None:
    losses, val = recorder.losses, recorder.val_losses
    assert len(losses) == GPT2_STEPS and len(val) >= 3
    assert _mean(losses[-20:]) < CHAIN_ENTROPY + 0.25
    assert val[-1] == min(val) and val[-1] < CHAIN_ENTROPY + 0.25  # the held-out loss keeps improving
    assert all(b < a for a, b in itertools.pairwise(val))


# ------------------------------------------------------------------------------------------------ BERT


def _bert(lr: float, seed: int) -> Build:
    def build() -> tuple[TinyBertFinetune, DataLoader, DataLoader | None]:
        return TinyBertFinetune(lr=lr), loader(text_classification(1024, seed=seed), 32, seed), None

    return build


@functools.lru_cache(maxsize=4)
def bert_good_lr_twin(seed: int) -> PlainRecorder:
    """BERT at its good LR (dropout 0.1, weight decay 0.01), ``seed``, 150 steps: a BERT problem's twin."""
    twin = FieldCase("bert_twin", _bert(BERT_GOOD_LR, seed), None, 0, lambda r: None, max_steps=BERT_STEPS)
    twin.seed = seed
    return run_case(twin, monitor=False)[1]


def _prove_bert_stuck_at_chance(recorder: PlainRecorder) -> None:
    losses, twin = recorder.losses, bert_good_lr_twin(0).losses
    assert len(losses) == BERT_STEPS
    assert _mean(losses[-50:]) > 0.97 * math.log(2)  # 150 steps at 10x: still at chance (ln 2)
    assert min(_mean(losses[i : i + 10]) for i in range(0, BERT_STEPS, 10)) > 0.95 * math.log(2)
    assert _mean(twin[-20:]) < LABEL_NOISE_ENTROPY + 0.12  # the good LR reaches the label-noise floor


def _prove_bert_thrown_back(recorder: PlainRecorder) -> None:
    losses, twin = recorder.losses, bert_good_lr_twin(3).losses
    assert len(losses) == BERT_STEPS
    best = min(_mean(losses[i : i + 10]) for i in range(0, BERT_STEPS, 10))
    assert best < 0.6 * math.log(2)  # at 10x it learns for a while ...
    assert _mean(losses[-50:]) > 0.9 * math.log(2)  # ... then is thrown back to chance and stays there
    assert _mean(losses[-50:]) > 1.6 * best
    assert _mean(twin[-20:]) < LABEL_NOISE_ENTROPY + 0.12  # the good LR keeps what it learned


def _overfitting_bert() -> tuple[ValidatedBert, DataLoader, DataLoader | None]:
    return (
        ValidatedBert(lr=BERT_GOOD_LR, dropout=0.0, weight_decay=0.0),
        loader(text_classification(64, seed=0), 16, 0),
        DataLoader(text_classification(256, seed=100), batch_size=256),
    )


OVERFIT_BEST_STEP = 48  # the validation after epoch 12 (8 steps per validation: 4 batches, every 2nd epoch)


def _prove_overfitting(recorder: PlainRecorder) -> None:
    val, train = recorder.val_losses, recorder.epoch_train_losses
    assert len(val) == 20
    best = val.index(min(val))
    assert (best + 1) * 8 == OVERFIT_BEST_STEP and val[best] < 0.85 * math.log(2)  # it did learn first
    assert all(v > 1.3 * val[best] for v in val[best + 1 :])  # then every validation is 30%+ worse
    assert val[-1] > 2.5 * val[best]  # ... and ends at 2.9x the best
    assert train[-1] < 0.05 and train[-1] < 0.1 * train[best]  # while the training loss goes to ~0


def _bert_small_val() -> tuple[ValidatedBert, DataLoader, DataLoader | None]:
    return (
        ValidatedBert(lr=BERT_GOOD_LR, dropout=0.0, weight_decay=0.0),
        loader(text_classification(1024, seed=0), 32, 0),
        DataLoader(text_classification(64, seed=100), batch_size=64),
    )


def _bert_regularised() -> tuple[ValidatedBert, DataLoader, DataLoader | None]:
    return (
        ValidatedBert(lr=BERT_GOOD_LR, dropout=0.1, weight_decay=0.01),
        loader(text_classification(1024, seed=1), 32, 1),
        DataLoader(text_classification(256, seed=101), batch_size=256),
    )


def _prove_bert_validated_trains(recorder: PlainRecorder) -> None:
    losses, val = recorder.losses, recorder.val_losses
    assert len(val) >= 6
    assert _mean(losses[-20:]) < LABEL_NOISE_ENTROPY + 0.12  # trained to the label-noise floor
    assert min(val) < 0.65 * math.log(2)  # the held-out loss fell from chance too
    best = val.index(min(val))
    assert best >= len(val) - 3  # its best is among the last three validations: no overfitting
    assert val[-1] < 1.1 * min(val)


CASES: list[FieldCase] = [
    FieldCase(
        name="gpt2_adamw_10x_lr_stuck",
        build=_gpt2(10 * GPT2_GOOD_LR),
        expected="lr_too_high",
        onset_step=0,
        proof=_prove_gpt2_lr_too_high,
        max_steps=GPT2_STEPS,
        description="GPT-2 (2 layers, width 32) with AdamW at 1e-1, 10x its good LR: stuck at ~3.2 (3x the "
        "chain's entropy) where the good LR reaches 1.1.",
    ),
    FieldCase(
        name="gpt2_adamw_lr_1e-6",
        build=_gpt2(1e-6),
        expected="lr_too_low",
        onset_step=0,
        proof=_prove_gpt2_lr_too_low,
        max_steps=GPT2_STEPS,
        description="GPT-2 with AdamW at 1e-6: 200 steps leave the loss at chance (ln 64).",
    ),
    FieldCase(
        name="gpt2_lr_collapses_at_step_40",
        build=_gpt2(GPT2_GOOD_LR, schedule="collapse", collapse_step=COLLAPSE_STEP, gamma=1e-6),
        expected="lr_too_low",
        onset_step=COLLAPSE_STEP,
        proof=_prove_gpt2_lr_collapse,
        max_steps=GPT2_STEPS,
        description="GPT-2 at its good LR until a step decay with gamma 1e-6 at step 40, mid-descent: the "
        "loss freezes at ~1.45 where the run without the collapse reaches 1.1.",
    ),
    FieldCase(
        name="bert_finetune_10x_lr_stuck_at_chance",
        build=_bert(10 * BERT_GOOD_LR, seed=0),
        expected="lr_too_high",
        onset_step=0,
        proof=_prove_bert_stuck_at_chance,
        max_steps=BERT_STEPS,
        check_every=10,
        seed=0,
        description="BERT (2 layers, width 32) fine-tuned with AdamW at 1e-2, 10x its good LR: never leaves "
        "ln 2 where the good LR reaches the label-noise floor.",
    ),
    FieldCase(
        name="bert_finetune_10x_lr_thrown_back",
        build=_bert(10 * BERT_GOOD_LR, seed=3),
        expected="lr_too_high",
        onset_step=0,
        proof=_prove_bert_thrown_back,
        max_steps=BERT_STEPS,
        check_every=10,
        seed=3,
        description="BERT at 10x its good LR, seed 3: learns to ~0.37 in 30 steps, then is thrown back to "
        "chance.",
    ),
    FieldCase(
        name="bert_overfits_64_samples",
        build=_overfitting_bert,
        expected="overfitting",
        onset_step=OVERFIT_BEST_STEP,
        proof=_prove_overfitting,
        max_steps=160,
        check_every=10,
        trainer_kwargs={"check_val_every_n_epoch": 2},
        description="BERT without dropout or weight decay on 64 noisy samples, validated on 256: the val "
        "loss is best at step 48, then climbs to 2.9x that while the training loss goes to ~0.",
    ),
    FieldCase(
        name="gpt2_warmup_cosine_good_lr",
        build=_gpt2(GPT2_GOOD_LR, schedule="warmup_cosine", warmup_steps=20, total_steps=GPT2_STEPS),
        expected=None,
        onset_step=0,
        proof=_prove_gpt2_warmup_cosine_trains,
        max_steps=GPT2_STEPS,
        description="GPT-2 with AdamW at its good LR, 20 warm-up steps and a cosine to 0: reaches the "
        "chain's entropy.",
    ),
    FieldCase(
        name="gpt2_validated_3e-3",
        build=_gpt2_with_validation,
        expected=None,
        onset_step=0,
        proof=_prove_gpt2_validated_trains,
        max_steps=GPT2_STEPS,
        description="GPT-2 at 3e-3 with a held-out set of 128 sequences validated every epoch (32 steps): "
        "both losses fall together.",
    ),
    FieldCase(
        name="bert_finetune_good_lr_64_val_samples",
        build=_bert_small_val,
        expected=None,
        onset_step=0,
        proof=_prove_bert_validated_trains,
        max_steps=200,
        description="BERT at its good LR on 1024 samples, validated every epoch on 64 samples (a noisy val "
        "loss).",
    ),
    FieldCase(
        name="bert_finetune_dropout_weight_decay",
        build=_bert_regularised,
        expected=None,
        onset_step=0,
        proof=_prove_bert_validated_trains,
        max_steps=200,
        seed=1,
        description="BERT at its good LR with dropout 0.1 and weight decay 0.01, validated on 256 samples.",
    ),
]
