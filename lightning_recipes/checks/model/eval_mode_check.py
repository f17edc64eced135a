"""Check that the model in ``eval()`` is a deterministic function of its input and changes no state."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack, suppress
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules import batchnorm, dropout, instancenorm
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._probe import first_of, listed, model_output
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.report import SUMMARY_LIMIT, CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import first_tensor
from lightning_recipes.harness.batches import batch_size_of, slice_batch
from lightning_recipes.harness.forward_capture import step_output
from lightning_recipes.harness.isolation import seed_all

__all__ = ["EvalModeCheck"]

Record = tuple[str, str, int, list[Tensor], Tensor | None]  # (name, class, sub-calls' start, inputs, output)


class EvalModeCheck(SanityCheck):
    """What validation reports is what the model does: in ``eval()`` two passes under different seeds agree
    and change no parameter or buffer (the guide has the rules). Cost: two forwards with per-module hooks.

    Args:
        num_samples: Samples of the first training batch used.
        rtol: Outputs differing by more than ``rtol`` x their largest magnitude (plus ``1e-6``) differ.

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = EvalModeCheck().run(CheckContext(TinyClassifier(), random_classification_loader()))
        >>> result.status
        'pass'
    """

    name = "eval_mode"

    def __init__(
        self,
        num_samples: int = 8,
        rtol: float = 1e-4,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_samples", num_samples, minimum=1)
        check_in_range("rtol", rtol, 0, 1, low_open=True, high_open=True)
        self.num_samples, self.rtol = num_samples, rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batch = first_of(context, context.train_batches(1)[0], self.num_samples)
        model = context.copy_model().eval()
        states = [_state(model)]
        passes = []
        for offset in (1, 2):
            passes.append(_observe(context, model, batch, context.seed + offset))
            states.append(_state(model))
        first, changed = _changed(states[0], states[1]), _changed(states[1], states[2])
        initialised: list[str] = []
        size = batch_size_of(batch, context.input_key)
        if first and not changed:  # a one-time initialisation, unless other samples change it again
            half = batch if size is None or size < 2 else slice_batch(batch, (size + 1) // 2, size)
            with suppress(Exception):  # the user's code cannot take half the batch: the same batch tells
                _observe(context, model, half, context.seed + 3)
            changed = _changed(states[2], _state(model))
            if not changed:
                initialised = first
                passes[0] = _observe(context, model, batch, context.seed + 1)  # compared after it
        (out_a, records_a), (out_b, records_b) = passes
        culprit, before = self._localise(records_a, records_b)
        gap = (out_a.double() - out_b.double()).abs().nan_to_num() if out_a.shape == out_b.shape else None
        details: dict[str, Any] = {
            "mode_dependent_layers": _mode_dependent_layers(model),
            "changed_state": changed,
            "initialised_state": initialised,
            "outputs_equal": _same(out_a, out_b, self.rtol),
            "max_difference": float("inf") if gap is None else float(gap.max()) if gap.numel() else 0.0,
            "random_module": culprit,
        }
        if changed:
            summary = f"a pass in eval() changed the model's state: {listed([f'`{n}`' for n in changed])}"
            action = "Update running statistics, counters and caches only under `if self.training:`."
            return self.verdict("fail", summary, details, action)
        if culprit is not None and _samples_a_prediction(context, model, batch):
            details["sampled"] = True
            why = "the output is sampled (location + scale x noise, both predicted): randomness not judged"
            return self.verdict("pass", f"no state changed; {why}", details)
        if culprit is not None:
            where = f"`{culprit[0]}` ({culprit[1]})" if culprit[0] else f"its own forward ({culprit[1]})"
            if before is not None and (culprit[0] in ("", before) or before.startswith(culprit[0] + ".")):
                where += f", before `{before}`"
            summary = f"eval() gave different results on two seeds ({details['max_difference']:.2g} apart): "
            action = "Pass training=self.training to F.dropout; guard noise and masking by self.training."
            return self.verdict("fail", f"{summary}random in {where}"[:SUMMARY_LIMIT], details, action)
        equal = details["outputs_equal"]
        why = "two passes with different seeds agree" if equal else "only inputs the step draws differ"
        if initialised:
            names = listed([f"`{n}`" for n in initialised], width=40)
            summary = f"eval() is deterministic, and stateless once its first pass initialised {names}"
            return self.verdict("pass", summary[:SUMMARY_LIMIT], details)
        return self.verdict("pass", f"eval() is deterministic and stateless: {why}", details)

    def _localise(self, a: list[Record], b: list[Record]) -> tuple[tuple[str, str] | None, str | None]:
        """The innermost module given equal inputs that gave other outputs; the first given other inputs."""
        if [r[0] for r in a] != [r[0] for r in b]:
            return None, None  # data-dependent control flow: compare the final outputs only

        differs = [  # (name, kind, start of its sub-calls, inputs differ, output differs)
            (n, k, start, not _same(ia, ib, self.rtol), not _same(oa, ob, self.rtol))
            for (n, k, start, ia, oa), (*_, ib, ob) in zip(a, b, strict=True)
        ]
        first_input = next((n for n, _, _, d_in, _ in differs if d_in), None)
        for i, (name, kind, start, d_in, d_out) in enumerate(differs):
            inner = any(oi or oo for *_, oi, oo in differs[start:i])  # its own sub-calls
            if not d_in and (d_out or inner):
                return (name, kind), first_input
        return None, first_input


def _observe(context: CheckContext, model: Any, batch: Any, seed: int) -> tuple[Tensor, list[Record]]:
    """One eval pass under a fresh seed: the output and each module call's inputs and output."""
    records: list[Record] = []
    at: list[int] = []  # per open call, where its sub-calls' records start

    def record(name: str, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        inputs = [t.detach().clone() for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
        out = first_tensor(output)
        kept = None if out is None else out.detach().clone()
        records.append((name, type(module).__name__, at.pop(), inputs, kept))

    with ExitStack() as hooks, torch.no_grad():  # every hook removed on leaving
        for n, m in model.named_modules():
            hooks.enter_context(m.register_forward_pre_hook(lambda *_: at.append(len(records))))
            hooks.enter_context(m.register_forward_hook(partial(record, n), with_kwargs=True))
        seed_all(seed)  # different streams in the two passes (run() restores the caller's)
        output = _output(context, model, batch)
    return output.detach().clone(), records


class _Sampling(TorchFunctionMode):
    """Tags one forward's tensors by origin and sets ``found`` on a reparameterised sample (a VAE's)."""

    def __init__(self, batch: Any) -> None:
        super().__init__()
        self.found = False
        self._tags = {id(t): (t, frozenset({"input"})) for t in tree_leaves(batch) if isinstance(t, Tensor)}

    def _of(self, value: Any) -> frozenset[str]:
        if isinstance(value, nn.Parameter):
            return frozenset({"param"})
        entry = self._tags.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else frozenset()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        operands = [self._of(t) for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
        tags = frozenset().union(*operands)
        predicted = [t >= _PREDICTED and "noise" not in t for t in operands]
        if func in _GAUSSIAN:
            tags = frozenset({"noise"}) | (tags if func is torch.normal else frozenset())
            self.found |= func is torch.normal and any(predicted)
        elif func in _MUL and len(operands) == 2 and any(predicted) and any("noise" in t for t in operands):
            tags |= {"scaled"}
        elif func in _ADD and len(operands) == 2 and any(predicted) and any("scaled" in t for t in operands):
            self.found = True
        for leaf in tree_leaves(result) if tags else ():
            if isinstance(leaf, Tensor):
                self._tags[id(leaf)] = (leaf, tags | self._of(leaf))
        return result


_PREDICTED = frozenset({"input", "param"})
_GAUSSIAN = {torch.randn, torch.randn_like, torch.normal, Tensor.normal_}
_MUL = {torch.mul, Tensor.mul, Tensor.__mul__, Tensor.__rmul__}
_ADD = {torch.add, Tensor.add, Tensor.add_, Tensor.__add__, Tensor.__radd__, Tensor.__iadd__}


def _samples_a_prediction(context: CheckContext, model: Any, batch: Any) -> bool:
    """Whether one eval pass draws a reparameterised sample (:class:`_Sampling`)."""
    with suppress(Exception), _Sampling(batch) as probe, torch.no_grad():
        _output(context, model, batch)
        return probe.found
    return False


def _output(context: CheckContext, model: Any, batch: Any) -> Tensor:
    """:func:`model_output`, or the output seen in ``training_step`` when forward needs more."""
    try:
        return model_output(context, model, batch)
    except Exception as err:
        with suppress(Exception):
            return step_output(context, model, batch)
        raise err


def _same(a: Tensor | list[Tensor] | None, b: Tensor | list[Tensor] | None, rtol: float) -> bool:
    """Equal up to ``rtol`` x the largest magnitude + 1e-6, element by element."""
    if isinstance(a, list) or isinstance(b, list):
        return len(a or []) == len(b or []) and all(_same(x, y, rtol) for x, y in zip(a or [], b or []))
    if a is None or b is None:
        return True
    a, b = (t.to_padded_tensor(0.0) if t.is_nested else t for t in (a, b))  # a transformer's eval fast path
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if rtol == 0.0 or not (torch.is_floating_point(a) or torch.is_complex(a)):
        return torch.equal(a.nan_to_num(), b.nan_to_num()) if a.is_floating_point() else torch.equal(a, b)
    scale = float(a.abs().nan_to_num().max()) if a.numel() else 0.0  # sync: once per compared tensor
    return bool(torch.allclose(a, b, rtol=0.0, atol=rtol * scale + 1e-6, equal_nan=True))


def _state(model: nn.Module) -> dict[str, Tensor]:
    """A float64 checksum per parameter (no weight copy) and a copy of each buffer."""
    state = {}
    for name, param in model.named_parameters():
        flat = param.detach().flatten().double()
        weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.float64) / flat.numel()
        state[name] = torch.stack([flat.sum(), (flat * weights).sum()])
    return state | {name: b.detach().clone() for name, b in model.named_buffers()}


def _changed(before: dict[str, Tensor], after: dict[str, Tensor]) -> list[str]:
    names = list(after) + [n for n in before if n not in after]
    return [n for n in names if n not in before or n not in after or not _same(before[n], after[n], 0.0)]


def _mode_dependent_layers(model: nn.Module) -> dict[str, int]:
    """Layers whose output depends on train()/eval() (for information, never flagged), by class."""
    kinds = (dropout._DropoutNd, batchnorm._BatchNorm, instancenorm._InstanceNorm)
    tracked = (m for m in model.modules() if not isinstance(m, kinds[2]) or m.track_running_stats)
    return dict(Counter(type(m).__name__ for m in tracked if isinstance(m, kinds)))
