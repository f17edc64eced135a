"""Loop-stage gallery (issue #24, part B): silent bugs in optimisation (automatic and manual), the LR schedule
and the validation path, and healthy look-alikes. Written blind: without reading the checks' code and without
running the preflight on these cases.

``TWINS`` maps every bug's id to its healthy twin (the same model with the bug fixed) and what the twin test
compares: ``"heldout"`` (accuracy of the trained model on held-out data) or ``"reported"`` (the validation
accuracy the model's own ``validation_step`` reports), with the minimum gap the bug must cost.
"""

from __future__ import annotations

from collections.abc import Callable

import lightning.pytorch as pl

from galleries.preflight.stage import Case
from galleries.preflight.stage import _loop_stage_models as M
from galleries.preflight.stage import _loop_stage_val_models as V

OPT, SCHED, VAL = "optimization", "schedule", "validation_path"

BUGS: list[Case] = [
    # optimisation
    Case(
        "st_manual_accumulation_never_zeroes",
        OPT,
        "MLP (manual)",
        M.AccumulatingManualNeverZeroes,
        M.digits_data,
        OPT,
    ),
    Case(
        "st_manual_step_before_backward", OPT, "MLP (manual)", M.ManualStepBeforeBackward, M.digits_data, OPT
    ),
    Case(
        "st_manual_zero_grad_after_backward",
        OPT,
        "MLP (manual)",
        M.ManualZeroGradAfterBackward,
        M.digits_data,
        OPT,
    ),
    Case(
        "st_manual_steps_wrong_optimizer",
        OPT,
        "MLP + decoder (manual, 2 optimizers)",
        M.ClassifierWithDecoderStepsWrongOptimizer,
        M.digits_data,
        OPT,
    ),
    Case(
        "st_param_groups_miss_stem",
        OPT,
        "MLP (param groups)",
        M.BottleneckParamGroupsMissStem,
        M.digits_data,
        OPT,
    ),
    # schedule
    Case("st_steplr_registered_per_step", SCHED, "MLP", M.StepLRRegisteredPerStep, M.digits_data, SCHED),
    Case("st_warmup_registered_per_epoch", SCHED, "MLP", M.WarmupRegisteredPerEpoch, M.digits_data, SCHED),
    Case("st_warmup_without_end", SCHED, "MLP", M.WarmupWithoutEnd, M.digits_data, SCHED),
    Case(
        "st_onecycle_steps_per_epoch_is_dataset_size",
        SCHED,
        "MLP",
        M.OneCycleStepsPerEpochIsDatasetSize,
        M.digits_data,
        SCHED,
    ),
    # validation path
    Case(
        "st_ema_rebinds_instead_of_updating",
        VAL,
        "MLP (EMA)",
        V.EMARebindsInsteadOfUpdating,
        M.digits_data,
        VAL,
    ),
    Case("st_ema_decay_too_slow_for_run", VAL, "MLP (EMA)", V.EMADecayTooSlowForRun, M.digits_data, VAL),
    Case("st_eval_copy_made_once_at_setup", VAL, "MLP", V.EvalCopyMadeOnceAtSetup, M.digits_data, VAL),
    Case(
        "st_val_normalises_differently", VAL, "MLP", V.ValidationNormalisesToMinusOneOne, M.digits_data, VAL
    ),
    Case(
        "st_val_head_on_first_gru_layer",
        VAL,
        "GRU classifier",
        V.GRUValidationReadsFirstLayer,
        V.sequence_data,
        VAL,
    ),
]

HEALTHY: list[Case] = [
    Case("st_vit_digits", "healthy", "ViT", V.TinyViT, M.digits_image_data),
    Case("st_causal_tcn_forecaster", "healthy", "causal TCN", V.CausalTCN, V.wave_data),
    Case(
        "st_hf_bert_attention_mask", "healthy", "transformer (Hugging Face)", V.HFBertClassifier, V.token_data
    ),
    Case("st_manual_accumulation_2", "healthy", "MLP (manual)", M.AccumulatingManual, M.digits_data),
    Case("st_ema_validation", "healthy", "MLP (EMA)", V.EMAClassifier, M.digits_data),
    Case("st_warmup_cosine_estimated_steps", "healthy", "MLP", V.WarmupCosinePerStep, M.digits_data),
    Case("st_onecycle_estimated_steps_cnn", "healthy", "CNN", V.OneCycleCNN, M.digits_image_data),
    # the healthy twins of the bugs above (look-alikes differing only by the bug)
    Case("st_manual_zero_backward_step", "healthy", "MLP (manual)", M.ManualSGD, M.digits_data),
    Case(
        "st_manual_two_optimizers",
        "healthy",
        "MLP + decoder (manual, 2 optimizers)",
        M.ClassifierWithDecoder,
        M.digits_data,
    ),
    Case("st_param_groups_complete", "healthy", "MLP (param groups)", M.BottleneckClassifier, M.digits_data),
    Case("st_steplr_per_epoch", "healthy", "MLP", M.ScheduledSGD, M.digits_data),
    Case("st_warmup_per_step", "healthy", "MLP", M.WarmupPerStep, M.digits_data),
    Case("st_onecycle_batches_per_epoch", "healthy", "MLP", M.OneCycleSGD, M.digits_data),
    Case("st_eval_copy_refreshed", "healthy", "MLP", V.EvalCopyClassifier, M.digits_data),
    Case("st_standardised_train_and_val", "healthy", "MLP", V.StandardisingClassifier, M.digits_data),
    Case("st_gru_last_layer", "healthy", "GRU classifier", V.GRUClassifier, V.sequence_data),
]

HELDOUT, REPORTED = "heldout", "reported"

# bug id -> (healthy twin, what the twin test compares, minimum accuracy gap the bug must cost)
TWINS: dict[str, tuple[Callable[[], pl.LightningModule], str, float]] = {
    "st_manual_accumulation_never_zeroes": (M.AccumulatingManual, HELDOUT, 0.2),
    "st_manual_step_before_backward": (M.ManualSGD, HELDOUT, 0.5),
    "st_manual_zero_grad_after_backward": (M.ManualSGD, HELDOUT, 0.5),
    "st_ema_decay_too_slow_for_run": (V.EMAClassifier, REPORTED, 0.3),
    "st_manual_steps_wrong_optimizer": (M.ClassifierWithDecoder, HELDOUT, 0.5),
    "st_param_groups_miss_stem": (M.BottleneckClassifier, HELDOUT, 0.2),
    "st_steplr_registered_per_step": (M.ScheduledSGD, HELDOUT, 0.3),
    "st_warmup_registered_per_epoch": (M.WarmupPerStep, HELDOUT, 0.08),
    "st_warmup_without_end": (M.WarmupPerStep, HELDOUT, 0.15),
    "st_onecycle_steps_per_epoch_is_dataset_size": (M.OneCycleSGD, HELDOUT, 0.05),
    "st_ema_rebinds_instead_of_updating": (V.EMAClassifier, REPORTED, 0.5),
    "st_eval_copy_made_once_at_setup": (V.EvalCopyClassifier, REPORTED, 0.5),
    "st_val_normalises_differently": (V.StandardisingClassifier, REPORTED, 0.15),
    "st_val_head_on_first_gru_layer": (V.GRUClassifier, REPORTED, 0.3),
}


def case_by_id(case_id: str) -> Case:
    return next(case for case in BUGS + HEALTHY if case.id == case_id)


__all__ = ["BUGS", "HEALTHY", "TWINS", "case_by_id"]
