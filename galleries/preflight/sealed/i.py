"""Sealed gallery I: a contextual bandit trained by REINFORCE, FiLM-conditioned multi-task regression, a
temporal point process (next inter-event gap), deep ensembles (averaged and stacked), Monte-Carlo-dropout
serving, domain adaptation with a gradient reversal layer, a monotone (shape-constrained) risk head, a
monotone calibration head on a frozen classifier, off-policy learning from logged bandit feedback and image
inpainting with masks. Written blind (see the package docstring); each bug is proved against its healthy
twin in ``test_proofs_i.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _i_data as d
from galleries.preflight.sealed import _i_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, n: int = 1000, transform=None, classes: int | None = None, **kw) -> dict[str, Any]:
    """``make(n, 1)`` for training (through ``transform`` per read, if given) and ``make(300, 2)`` for
    validation."""
    out = d.loaders(d.Rows(*make(n, 1), transform=transform), d.Rows(*make(300, 2)), **kw)
    return {**out, "num_classes": classes} if classes else out


def digit_data(classes: int | None = 10) -> dict[str, Any]:
    """The training and validation digits (``classes`` None: the labels are not a target, e.g. a bandit's
    payout)."""
    return rows_data(lambda n, seed: d.digits("train" if seed == 1 else "val"), classes=classes)


bandit_data = partial(digit_data, classes=None)


def logged_data() -> dict[str, Any]:
    """Logged bandit feedback of the training and validation digits, 8 impressions each."""
    train, val = d.logged_feedback("train", 1), d.logged_feedback("val", 2)
    return d.loaders(d.Rows(*train), d.Rows(*val), batch_size=128)


def calibration_data(rows: str = "val") -> dict[str, Any]:
    """Calibration rows for the frozen scorer: the first 200 validation digits (10 passes per epoch), the
    last 100 for validation; ``rows="train"`` (the BUG): the scorer's own 1,000 training digits."""
    x, y = d.digits("val")
    train = d.digits("train") if rows == "train" else (x[:200].repeat(10, 1), y[:200].repeat(10))
    return {**d.loaders(d.Rows(*train), d.Rows(x[200:], y[200:]), batch_size=100), "num_classes": 10}


def inpaint_data(transform=d.cut_hole) -> dict[str, Any]:
    """Training digits holed afresh on every read by ``transform``; validation digits with fixed holes."""
    image, label = d.digits("train", shape=(1, 8, 8))
    return d.loaders(d.Rows(image, label, transform=transform), d.Rows(*d.holed_digits("val", 2)))


task_data = partial(rows_data, d.task_rows, 2000)
event_data = partial(rows_data, d.event_gaps, 1000)
adaptation_data = partial(rows_data, d.adaptation_rows, 2000, batch_size=64)
credit_data = partial(rows_data, d.credit_rows, 2000, batch_size=64)

PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
STEPPED = "every trained parameter is stepped"
SERVED = "what validation reports is what the model does when served"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "bandit_log_prob_broadcasts",
        "contextual bandit trained by REINFORCE (digits as arms)",
        m.DigitBanditMultinomial,
        bandit_data,
        "The arm comes from torch.multinomial(probs, 1), shape (B, 1), and Categorical.log_prob of it is "
        "(B, B): every context is credited with every other context's arm, and the policy learns no "
        "dependence on the context.",
        TASK_LOSS,
    ),
    SealedCase(
        "bandit_greedy_actions_in_training",
        "contextual bandit trained by REINFORCE (exploration)",
        m.DigitBanditGreedy,
        bandit_data,
        "The training step takes the argmax arm (the serving rule) instead of sampling one, so the policy "
        "only hears about the arm it already prefers and never finds the right arm where it starts wrong.",
        TASK_LOSS,
    ),
    SealedCase(
        "bandit_logged_without_propensity",
        "off-policy learning from logged bandit feedback",
        m.DigitOffPolicyNoPropensity,
        logged_data,
        "The logged rewards are not divided by the logging propensity: the new policy learns from what the "
        "old policy chose to show and inherits its preference for the low arms.",
        TASK_LOSS,
    ),
    SealedCase(
        "inpaint_loss_on_visible_pixels",
        "image inpainting with masks",
        m.InpaintNetScoresVisible,
        inpaint_data,
        "The loss weights pixels by 1 - mask, reading the mask as 'ones are kept' where its ones mark the "
        "hole: the network learns to copy what it sees and is never scored on the hole.",
        TASK_LOSS,
    ),
    SealedCase(
        "inpaint_hole_cut_in_place",
        "image inpainting with masks (augmentation)",
        m.InpaintNet,
        partial(inpaint_data, d.cut_hole_in_place),
        "The hole is zeroed in place in the row the dataset returns, a view of the stored digit that is also "
        "the target: the model learns to fill holes with black, and the stored digits gather holes.",
        PAIRED,
    ),
    SealedCase(
        "calibration_fit_on_scorer_training_rows",
        "monotone calibration head on a frozen, pretrained classifier (calibration split)",
        m.CalibratedScorer,
        partial(calibration_data, rows="train"),
        "The calibration head is fitted on the rows the scorer was trained on, where it is right and sure: "
        "the head learns to trust it fully, and on new digits its probabilities are overconfident.",
        "splits do not share rows",
    ),
    SealedCase(
        "film_reads_first_rows_task",
        "FiLM-conditioned multi-task regression",
        m.FiLMNetFirstTask,
        task_data,
        "The FiLM generator is fed task[0] (batches used to hold one task each); its output broadcasts over "
        "the shuffled batch, so each row is modulated by another row's task and the tasks blur together.",
        DEPENDS,
    ),
    SealedCase(
        "tpp_outputs_not_shifted",
        "temporal point process (next inter-event gap, exponential likelihood)",
        m.GapGRUTargetsNotShifted,
        event_data,
        "The GRU outputs are sliced [:, 1:] like the targets, so the state predicting gap t has read gap t: "
        "the loss scores a copy of the answer, and served after a history the model describes the last gap.",
        PAIRED,
    ),
    SealedCase(
        "tpp_compensator_dropped",
        "temporal point process (next inter-event gap, exponential likelihood)",
        m.GapGRUNoCompensator,
        event_data,
        "The likelihood keeps -log rate at the events and drops the survival term rate * gap: the loss falls "
        "for ever by raising every rate, and the served rates are far too high.",
        TASK_LOSS,
    ),
    SealedCase(
        "ensemble_one_member_five_times",
        "deep ensemble (averaged probabilities)",
        m.DigitEnsembleOneMember,
        digit_data,
        "The members are nn.ModuleList([member()] * 5): five references to one network, so the members never "
        "disagree and the served uncertainty is 0 on every input, wrong answers included.",
        DEPENDS,
    ),
    SealedCase(
        "stacked_members_in_plain_list",
        "deep ensemble (learned stacking combiner)",
        m.StackedEnsemblePlainList,
        digit_data,
        "The members live in a plain Python list, unregistered: the optimizer steps the combiner only, which "
        "stacks five random networks' logits.",
        STEPPED,
    ),
    SealedCase(
        "mc_dropout_switches_batchnorm",
        "Monte-Carlo-dropout serving (BatchNorm in the network)",
        m.MCDropoutNetTrainMode,
        digit_data,
        "predict() turns dropout on with self.train(), which also puts BatchNorm in training mode: served "
        "requests are normalised by their own small batch, and the running statistics drift.",
        SERVED,
    ),
    SealedCase(
        "dann_progress_from_max_steps",
        "domain adaptation with a gradient reversal layer (strength schedule)",
        m.DANNProgressFromMaxSteps,
        adaptation_data,
        "The schedule's progress is global_step / trainer.max_steps, which is -1 in a run set by max_epochs: "
        "p is clamped to 0, the reversal strength stays 0 and the model is a source-only classifier.",
        SCHEDULE,
    ),
    SealedCase(
        "dann_reversal_without_minus",
        "domain adaptation with a gradient reversal layer",
        m.DANNNoMinus,
        adaptation_data,
        "The reversal layer's backward returns scale * grad with no minus: the features help the domain head "
        "instead of fooling it, and lean on the sensor that differs between domains.",
        TASK_LOSS,
    ),
    SealedCase(
        "monotone_income_wrong_direction",
        "monotone (shape-constrained) default-risk head",
        m.MonotoneRiskWrongDirection,
        credit_data,
        "The income constraint is declared increasing where risk falls with income: the monotone part can "
        "only flatten, and the model loses what income says.",
        DEPENDS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "bandit_reinforce_sampled_arms",
            "contextual bandit, REINFORCE (labels only pay out)",
            m.DigitBandit,
            bandit_data,
        ),
        (
            "bandit_actor_critic_baseline",
            "contextual bandit, REINFORCE with a learned baseline (loss can be negative)",
            m.DigitActorCritic,
            bandit_data,
        ),
        (
            "bandit_logged_ips",
            "off-policy bandit, inverse propensity weights up to 68",
            m.DigitOffPolicy,
            logged_data,
        ),
        ("inpaint_hole_loss", "inpainting (loss on the hole only)", m.InpaintNet, inpaint_data),
        (
            "calibration_on_held_out_rows",
            "monotone calibration head (frozen pretrained scorer, 49 trained parameters)",
            m.CalibratedScorer,
            calibration_data,
        ),
        ("film_per_row_task", "FiLM-conditioned multi-task regression", m.FiLMNet, task_data),
        (
            "film_generator_zero_initialised",
            "FiLM (generator's last layer zero at init)",
            partial(m.FiLMNet, zero_init=True),
            task_data,
        ),
        (
            "tpp_exponential_nll",
            "temporal point process (a density's NLL: negative on short gaps)",
            m.GapGRU,
            event_data,
        ),
        ("ensemble_sum_of_losses", "deep ensemble (init loss 5 ln 10)", m.DigitEnsemble, digit_data),
        ("stacked_ensemble", "deep ensemble (learned stacking combiner)", m.StackedEnsemble, digit_data),
        ("mc_dropout_serving", "MC dropout (stochastic predict, BN frozen)", m.MCDropoutNet, digit_data),
        ("dann_unlabelled_target", "gradient reversal (target rows unlabelled)", m.DANN, adaptation_data),
        ("monotone_softplus_weights", "monotone risk head (softplus weights)", m.MonotoneRisk, credit_data),
    )
]
