"""Check that the target cannot be read off the inputs without learning."""

from __future__ import annotations

from typing import Any

from typing_extensions import Unpack, override

from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._validation import check_bool, check_in_range, check_int
from lightning_recipes.checks._probe import first_of, held_out_split
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.data._leakage_probes import (
    Probe,
    probe_copy_targets,
    probe_hidden_unscored,
    probe_single_feature,
    probe_target_fed,
    probe_too_good,
)
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext

__all__ = ["TargetLeakageCheck"]

_IGNORED = "the loss does not change with the target (pass `target_key` if another tensor is it)"


class TargetLeakageCheck(SanityCheck):
    """Verify that the target is not recoverable from the inputs without learning (target leakage).

    Sub-tests (the guide has each): (0) the target alone moves the output, (a) unshifted sequence targets,
    (b) one feature predicts the label, (c) a held-out loss too good too soon. Cost: a few forwards, one
    backward, vectorised feature scans and up to ``train_steps`` steps.

    Args:
        num_batches: Training batches read.
        num_eval_batches: Held-out batches.
        num_samples: Samples kept from each training batch (``None``: whole batches).
        max_accuracy: (b) held-out accuracy of one feature's lookup table that counts as leakage.
        max_correlation: (b) absolute correlation of one feature with a regression target that leaks.
        num_bins: Deprecated: the lookup tables use 32 bins.
        train_steps: (c) optimizer steps of the short training (0 turns (c) off).
        too_good_fraction: (c) held-out loss below this fraction of ``ln C`` warns.
        target_as_input: (0) test whether the model's output changes with the target alone.

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier
        >>> x = torch.randn(256, 16)
        >>> y = (x[:, :4] @ torch.randn(4, 4)).argmax(-1)
        >>> x[:, 7] = y  # the label written into the features
        >>> loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
        >>> result = preflight(TinyClassifier(), train_dataloaders=loader, checks=[TargetLeakageCheck()])
        >>> result["target_leakage"].status, result["target_leakage"].details["feature"]
        ('fail', 'inputs[:, 7]')
    """

    name = "target_leakage"
    model_samples = 4  # samples of the first batch that tests (0) and (a) run the model on
    eval_samples = 128  # samples of each held-out batch the short training (c) is evaluated on

    def __init__(
        self,
        num_batches: int = 8,
        num_eval_batches: int = 2,
        num_samples: int | None = 64,
        max_accuracy: float = 0.99,
        max_correlation: float = 0.999,
        num_bins: int | None = None,
        train_steps: int = 20,
        too_good_fraction: float = 0.05,
        target_as_input: bool = True,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_eval_batches", num_eval_batches, minimum=1)
        check_int("num_samples", num_samples, minimum=2, optional=True)
        check_in_range("max_accuracy", max_accuracy, 0, 1, low_open=True)
        check_in_range("max_correlation", max_correlation, 0, 1, low_open=True)
        if num_bins is not None:
            warn_deprecated(
                "TargetLeakageCheck(num_bins=) is deprecated and ignored: the tables use 32 bins."
            )
        check_int("train_steps", train_steps, minimum=0)
        check_in_range("too_good_fraction", too_good_fraction, 0, 1, low_open=True)
        check_bool("target_as_input", target_as_input)
        self.num_batches, self.num_eval_batches, self.num_samples = num_batches, num_eval_batches, num_samples
        self.max_accuracy, self.max_correlation, self.train_steps = max_accuracy, max_correlation, train_steps
        self.too_good_fraction, self.target_as_input = too_good_fraction, target_as_input

    @override
    def check(self, context: CheckContext) -> CheckResult:
        args = self.num_batches, self.num_eval_batches, self.num_samples
        train, held_out, validation = held_out_split(context, *args)
        source = "validation batches" if validation else "held-out training batches (no validation loader)"
        first = first_of(context, train[0], self.model_samples)
        probes = {"hidden_unscored": _abstaining(probe_hidden_unscored, context, first)}
        if not probes["hidden_unscored"].leak:
            probes |= self._target_probes(context, train, held_out, first)
        details: dict[str, Any] = {"held_out": source, **{name: p.record() for name, p in probes.items()}}
        if leaks := [(name, p) for name, p in probes.items() if p.leak]:
            name, found = leaks[0]
            details["leaking_test"] = name
            if name == "single_feature":
                details["feature"] = found.evidence["name"]
            details["measured"] = found.evidence.get("score", found.evidence.get("measured"))
            return self.verdict(found.severity, found.summary, details, action=found.action)
        details["measured"] = probes["single_feature"].evidence.get("score")
        ran = [name for name, p in probes.items() if p.reason is None]
        if not ran:
            reasons = "; ".join(f"{n}: {p.reason}" for n, p in probes.items())
            raise CheckSkipped(f"no leakage test applies here: {reasons}")
        return self.verdict("pass", f"no target leakage in {len(ran)} of {len(probes)} tests", details)

    def _target_probes(
        self, context: CheckContext, train: list[Any], held_out: list[Any], first: Any
    ) -> dict[str, Probe]:
        """Sub-tests (0), (a), (b) and (c), which need the input and the target told apart."""
        if any(t is None for t in context.split(train[0])):
            raise CheckSkipped("cannot find the input and target tensors: pass `input_key` / `target_key`.")
        fed, uses = _abstaining(probe_target_fed, context, first, self.target_as_input)
        probes: dict[str, Probe] = {"target_as_input": fed}
        probes["copy_targets"] = _abstaining(probe_copy_targets, context, first)
        limits = {"max_accuracy": self.max_accuracy, "max_correlation": self.max_correlation}
        if uses is False:
            probes["single_feature"] = Probe(_IGNORED)
        else:
            probes["single_feature"] = _abstaining(probe_single_feature, context, train, held_out, **limits)
        if not any(p.leak for p in probes.values()):
            if uses is False:
                probes["too_good"] = Probe(_IGNORED)
            else:
                classes = probes["single_feature"].evidence.get("task", (None, None))[1]  # None: a regression
                capped = [first_of(context, batch, self.eval_samples) for batch in held_out]
                training = {"steps": self.train_steps, "fraction": self.too_good_fraction}
                probes["too_good"] = _abstaining(probe_too_good, context, train, capped, classes, **training)
        return probes


def _abstaining(probe: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one sub-test; when the user's code raises on its copy, that sub-test alone abstains."""
    try:
        return probe(*args, **kwargs)
    except (CheckSkipped, CannotRunOnCopy):
        raise
    except Exception as err:  # the user's training_step on a copy
        reason = Probe(f"your training_step raised {type(err).__name__} on a copy ({str(err)[:80]})")
        return (reason, None) if probe is probe_target_fed else reason
