"""``BatchIndependenceCheck`` skips with advice, not raw exception text, when forward needs more than the
input tensor (issue 12, item 11)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from lightning_recipes.checks import BatchIndependenceCheck, CheckContext, preflight

from . import _models as M


class NeedsMask(M.MLP):
    """forward takes the input and a mask: ``model(inputs)`` alone cannot run."""

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
        return self.net(x * mask)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss(self(x, (x != 0).float()), y)


def test_forward_that_needs_more_than_the_input_skips_with_what_to_pass():
    result = BatchIndependenceCheck().run(CheckContext(NeedsMask(), M.loader()))
    assert result.status == "skip"
    assert result.message.startswith(
        "skipped: the module's forward raised TypeError when called with the input tensor alone (the default "
        "input, shape [8, 16])."
    )
    assert "pass `input_key=`" in result.message and 'without "batch_independence"' in result.message
    assert "missing 1 required positional argument" not in result.message  # the raw text is in details
    assert "missing 1 required positional argument" in result.details["error"]


def test_the_advice_names_a_given_input_key_and_other_checks_still_run():
    report = preflight(
        NeedsMask(), train_dataloaders=M.loader(), checks=["init_loss", "batch_independence"], input_key=0
    )
    assert report["init_loss"].status == "pass"
    assert report["batch_independence"].status == "skip"
    assert "(batch[0], shape [8, 16])" in report["batch_independence"].message
