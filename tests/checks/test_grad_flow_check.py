"""grad_flow: frozen parameters are information unless clearly a mistake; LoRA-style and prior-initialised
models are not flagged; the retries are fixed work."""

from __future__ import annotations

import torch

from galleries.preflight.families import _existing_models as M
from lightning_recipes.checks import CheckContext, GradFlowCheck, preflight
from lightning_recipes.checks._budget import time_budget

from . import _models


def test_lora_style_model_passes_and_reports_the_frozen_base_as_information():
    """B = 0 at init: A gets an exactly-zero gradient at step 0, and the base is frozen. Before: a warn."""
    result = preflight(M.LoRAClassifier(), **M.classification_data(), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2  # A's gradient appears once B has moved
    assert result.details["frozen"] == ["base.weight", "base.bias"]
    assert result.details["frozen_in_optimizer"] == []


def test_prior_initialised_head_with_zero_weights_passes():
    class ZeroHeadPrior(M.PriorBiasBCE):
        def __init__(self):
            super().__init__(0.1)
            with torch.no_grad():
                self.net[-1].weight.zero_()  # only the prior bias: the body gets no gradient at step 0

    result = preflight(ZeroHeadPrior(), **M.binary_data(0.1), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2


def test_everything_frozen_fails():
    """Before: the backward pass raised and the check skipped ("could not run")."""

    class AllFrozen(M.MLPClassifier):
        def __init__(self):
            super().__init__()
            self.requires_grad_(False)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    result = preflight(AllFrozen(), **M.classification_data(), checks=[GradFlowCheck()])["grad_flow"]
    assert result.status == "fail", result.message
    assert result.details["trainable"] == 0 and len(result.details["frozen"]) == 4
    assert "requires_grad_(True)" in result.action


def test_frozen_layer_inside_the_optimizer_warns_and_says_so():
    result = GradFlowCheck().run(CheckContext(_models.FrozenLayer(), _models.loader()))
    assert result.status == "warn", result.message
    assert result.details["frozen_in_optimizer"] == ["net.0.weight", "net.0.bias"]


def test_the_retries_are_fixed_work_not_cut_by_the_time_budget():
    """TinyClassifier's zero head gives its body zero gradients at step 0; a spent time budget no longer cuts
    the retries short (issue #34: the verdict does not depend on machine load)."""
    from lightning_recipes.testing import TinyClassifier

    with time_budget(0.0):
        result = GradFlowCheck().check(CheckContext(TinyClassifier(), _models.loader()))
    assert result.status == "pass", result.message
    assert result.details["steps"] == 2 and len(result.summary) <= 120


def test_model_and_loop_summaries_are_one_short_sentence():
    """#34: every result of the model and loop checks is a summary of at most 120 characters and, when not
    a pass, one action; on the legacy gallery's bugs and a healthy model."""
    from galleries.preflight.families import legacy
    from lightning_recipes.checks.report import SUMMARY_LIMIT

    mine = ["grad_flow", "batch_independence", "causality", "padding", "eval_mode"]
    mine += ["schedule", "optimization", "validation_path"]
    for case in [c for c in legacy.BUGS if c.check in mine] + legacy.HEALTHY[:1]:
        torch.manual_seed(0)
        report = preflight(case.model(), **case.data(), checks=mine, progress=False)
        for result in report:
            assert len(result.summary) <= SUMMARY_LIMIT, (case.id, result.name, result.summary)
            assert result.status not in ("fail", "warn") or result.action, (case.id, result.name)
