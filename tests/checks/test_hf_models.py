"""The whole preflight on small-config Hugging Face models wrapped the usual way, and a torchvision-style
CNN."""

from __future__ import annotations

import pytest
import torch

from galleries.preflight.families import Case, shapes
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


def _shapes_case(case_id: str) -> Case:
    (case,) = [case for case in shapes.HEALTHY if case.id == case_id]
    return case


def _preflight(case: Case) -> PreflightReport:
    """The gallery's healthy case, run as test_gallery.py runs it (it leaves these cases to this file)."""
    torch.manual_seed(0)
    return preflight(case.model(), **case.data(), num_threads=1, progress=False)


@pytest.mark.parametrize(
    ("case_id", "init_words"),
    [
        # ln(V) against the logits the loss consumes (HF flattens them) and the labels (not attention_mask)
        ("hf_gpt2_causal_lm", "(ln 32, logits "),
        ("hf_gpt2_labels_from_input_ids", "(ln 32, logits "),
        ("hf_bert_classifier", "(ln 2, logits [16, 2] for integer targets [16])"),
    ],
    ids=["gpt2-causal-lm", "gpt2-labels-from-input-ids", "bert-sequence-classifier"],
)
def test_wrapped_hugging_face_models_pass_every_applicable_check(case_id: str, init_words: str) -> None:
    report = _preflight(_shapes_case(case_id))
    _assert_healthy(report)
    assert init_words.strip("()") in report["init_loss"].details["expected_from"]
    assert report["batch_independence"].details["method"] == "perturbation"  # token ids


def test_a_wrapped_torchvision_style_cnn_returning_a_dict_passes() -> None:
    report = _preflight(_shapes_case("wrapped_cnn_returns_dict"))
    _assert_healthy(report)
    assert report["batch_independence"].details["method"] == "perturbation"


# The same models with a planted bug (transposed input_ids, shuffled labels) are in gallery/shapes.py.
