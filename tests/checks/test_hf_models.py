"""The whole preflight on small-config Hugging Face models wrapped the usual way, and a torchvision-style
CNN."""

from __future__ import annotations

from typing import Any

import pytest

from galleries.preflight.families import _shapes_models as S
from lightning_recipes.checks import PreflightReport, preflight

pytest.importorskip("transformers", reason="the Hugging Face integration tests need `transformers`")

# The checks of today's preflight that apply to these shapes: every one must pass (none skips). Checks added
# later must not fail, and may skip only with a reason.
TODAY = ("data", "init_loss", "grad_flow", "batch_independence", "overfit_batch", "input_independence")


def _assert_healthy(report: PreflightReport) -> None:
    statuses = {result.name: result.status for result in report}
    for name in TODAY:
        assert statuses[name] == "pass", (name, report[name].message)
    for result in report:
        assert result.status != "fail", (result.name, result.message)
        if result.status == "skip":
            assert result.message.startswith("skipped: ") and len(result.message) > 40, result.message


@pytest.mark.parametrize(
    ("make", "data", "init_words"),
    [
        # ln(V) against the logits the loss consumes (HF flattens them) and the labels (not attention_mask)
        (S.HFCausalLM, S.lm_loaders, "(ln 32, logits "),
        (
            lambda: S.HFCausalLM(labels_from_inputs=True),
            lambda: S.lm_loaders(labels=False),
            "(ln 32, logits ",
        ),
        (S.HFClassifier, S.token_classification_loaders, "(ln 2, logits [16, 2] for integer targets [16])"),
    ],
    ids=["gpt2-causal-lm", "gpt2-labels-from-input-ids", "bert-sequence-classifier"],
)
def test_wrapped_hugging_face_models_pass_every_applicable_check(
    make: Any, data: Any, init_words: str
) -> None:
    report = preflight(make(), **data())
    _assert_healthy(report)
    assert init_words.strip("()") in report["init_loss"].details["expected_from"]
    assert report["batch_independence"].details["method"] == "perturbation"  # token ids


def test_a_wrapped_torchvision_style_cnn_returning_a_dict_passes() -> None:
    report = preflight(S.WrappedCNN(), **S.digits_loaders())
    _assert_healthy(report)
    assert report["batch_independence"].details["method"] == "perturbation"


# The same models with a planted bug (transposed input_ids, shuffled labels) are in gallery/shapes.py.
