"""Which loss consumed which tensors of the batch while ``training_step`` ran (:class:`LossRecorder`)."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Collection, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from lightning_recipes.harness.batches import batch_size_of
from lightning_recipes.harness.walk import batch_entries

__all__ = [
    "CLASSIFICATION",
    "KINDS",
    "LOSS_FUNCTIONS",
    "REGRESSION",
    "LossCall",
    "LossRecorder",
    "RowMix",
    "TargetSwapError",
    "loss_call_for",
    "record_loss_calls",
]

#: The losses whose value at initialisation and floor the checks know.
REGRESSION = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
CLASSIFICATION = frozenset(
    {"cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"}
)
KINDS = CLASSIFICATION | REGRESSION

# The torch.nn.functional losses (nn.*Loss modules call them too) -> the names of their prediction and target
_SPECIAL_ARGS: dict[str, tuple[str, str | None]] = {
    "ctc_loss": ("log_probs", "targets"),
    "cosine_embedding_loss": ("input1", "target"),
    "margin_ranking_loss": ("input1", "target"),
    "triplet_margin_loss": ("anchor", None),
}
_LOSSES: dict[str, tuple[str, str | None]] = {
    name: _SPECIAL_ARGS.get(name, ("input", "target"))
    for name in [
        *("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"),
        *("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss"),
        *("gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "multilabel_margin_loss"),
        *("multi_margin_loss", "hinge_embedding_loss", *_SPECIAL_ARGS),
    ]
}
#: Factories that read only their argument's shape, dtype and device: their result carries none of its values,
#: so no batch entry's tag (a diffusion step's noise is ``randn_like(x0)``, not a function of ``x0``).
_SHAPE_ONLY = {
    getattr(torch, f"{kind}_like") for kind in ("rand", "randn", "randint", "zeros", "ones", "empty", "full")
}
_SHAPE_ONLY |= {getattr(Tensor, f"new_{kind}") for kind in ("zeros", "ones", "empty", "full")}
LOSS_FUNCTIONS: dict[Callable[..., Any], str] = {
    getattr(F, name): name for name in _LOSSES if callable(getattr(F, name, None))
}


@dataclass(frozen=True)
class RowMix:
    """One call that broadcast a prediction (computed with the model's parameters) against a batch tensor, or
    a tensor drawn from the model without gradient (an action sampled by a policy), with their sample rows on
    different axes: row i met every row j (``(B, 1)`` minus ``(B,)`` is ``(B, B)``).

    Example:
        >>> RowMix("sub", (64, 1), (64,), frozenset([1]), rows=64).describe()
        '(64, 1) prediction against (64,) batch[1] in sub: every row meets every other row (64 x 64)'
    """

    function: str
    prediction: tuple[int, ...]
    other: tuple[int, ...]
    keys: frozenset[int | str | None]
    rows: int  # the batch size: the length of each tensor's sample axis
    drawn: bool = False  # the other tensor was drawn from the model's output without a gradient (a sample)

    def describe(self) -> str:
        rows = self.rows
        names = ", ".join("the batch" if k is None else f"batch[{k!r}]" for k in sorted(self.keys, key=str))
        names = f"a draw without gradient from {names}" if self.drawn else names
        return (
            f"{self.prediction} prediction against {self.other} {names} in {self.function}: every row meets "
            f"every other row ({rows} x {rows})"
        )


class TargetSwapError(ValueError):
    """A :class:`LossRecorder` given replacement ``targets`` met a loss call whose target does not fit."""


@dataclass
class LossCall:
    """One call of a ``torch.nn.functional`` loss seen while ``training_step`` ran.

    Attributes:
        function: The loss function's name (``"cross_entropy"``, ``"mse_loss"``, ...).
        output: The prediction it consumed (its ``input`` argument), as the loss saw it.
        target: Its ``target`` argument (``None`` for losses without one, e.g. ``triplet_margin_loss``).
        target_key: The one batch entry the target was computed from (a shifted or padded copy counts);
            ``None`` for none, several, the model, or a bare-tensor batch.
        target_keys: Every batch entry the target was computed from (``None``: a bare-tensor batch).
        target_from_model: The target was computed with the model's parameters (a teacher, an EMA copy).
        output_keys: Every batch entry the prediction was computed from (the inputs the model read).
        kwargs: The other arguments by name (``ignore_index``, ``label_smoothing``, ...), passed or defaulted.
        loss: What the call returned.
        inspection: What the recorder's ``inspect_output`` returned for :attr:`output` at call time (while the
            graph held its saved tensors); ``inspected`` is ``False`` without one.
    """

    function: str
    output: Tensor
    target: Tensor | None
    target_key: int | str | None
    target_keys: frozenset[int | str | None]
    output_keys: frozenset[int | str | None]
    kwargs: dict[str, Any] = field(default_factory=dict)
    target_from_model: bool = False
    loss: Tensor | None = None
    inspection: Any = None
    inspected: bool = False

    def target_from(self, key: int | str | None) -> bool:
        """Whether the target was computed from batch entry ``key`` (e.g. the input: a reconstruction)."""
        return key in self.target_keys

    @property
    def num_classes(self) -> int | None:
        """``C`` of a ``cross_entropy``/``nll_loss`` call (class dim 1, or 0 for an unbatched input)."""
        if self.function not in ("cross_entropy", "nll_loss"):
            return None
        return int(self.output.shape[1] if self.output.ndim >= 2 else self.output.shape[0])

    @property
    def integer_target(self) -> bool:
        """Whether the target holds class indices (not probabilities); ``False`` without a target."""
        return self.target is not None and not self.target.is_floating_point()


class LossRecorder(TorchFunctionMode):
    """A torch function mode that records the loss calls of a step and where their tensors came from.

    With ``batch`` given, each torch call's result is tagged with the batch entries its tensor arguments came
    from (a target is traced through shifts, pads, views and copies). ``targets``: the ``i``-th loss call's
    target is replaced by ``targets[i]`` when not ``None`` (same shape); ``functions``: the losses recorded
    (by name; default all of :data:`LOSS_FUNCTIONS`); ``inspect_output``: run on each prediction at call time.
    Cost: one Python call per torch operation while active; never used on the user's training.
    """

    def __init__(
        self,
        batch: Any = None,
        targets: Sequence[Tensor | None] | None = None,
        *,
        functions: Collection[str] | None = None,
        inspect_output: Callable[[Tensor], Any] | None = None,
    ) -> None:
        super().__init__()
        self.calls: list[LossCall] = []
        self._functions = None if functions is None else frozenset(functions)
        self._inspect = inspect_output
        self._targets = list(targets) if targets is not None else None
        self._count = 0
        self._tags: dict[int, tuple[weakref.ref[Tensor], frozenset[int | str | None]]] = {}
        self._computed: dict[int, weakref.ref[Tensor]] = {}  # tensors computed with a parameter
        self._trace = batch is not None
        self.rows = batch_size_of(batch) if batch is not None else None
        self.mixed: list[RowMix] = []  # broadcasts that paired a prediction's row i with a batch row j
        for key, tensor in batch_entries(batch):
            self._tag(tensor, frozenset([key]))

    def _tag(self, tensor: Tensor, keys: frozenset[int | str | None]) -> None:
        previous = self._sources(tensor)
        self._tags[id(tensor)] = (weakref.ref(tensor), keys | previous)

    def _sources(self, tensor: Any) -> frozenset[int | str | None]:
        entry = self._tags.get(id(tensor)) if isinstance(tensor, Tensor) else None
        return entry[1] if entry is not None and entry[0]() is tensor else frozenset()

    def _is_computed(self, tensor: Any) -> bool:
        ref = self._computed.get(id(tensor)) if isinstance(tensor, Tensor) else None
        return ref is not None and ref() is tensor

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        name = LOSS_FUNCTIONS.get(func)
        bound = None if name is None else _bind(func, args, kwargs)
        if name is not None and bound is not None and self._targets is not None:
            self._swap_target(name, bound)
            args, kwargs = bound.args, bound.kwargs
        result = func(*args, **kwargs)
        if self._trace and func not in _SHAPE_ONLY:
            sources: frozenset[int | str | None] = frozenset()
            computed = False
            for leaf in tree_leaves((args, kwargs)):
                sources = sources | self._sources(leaf)
                computed = computed or isinstance(leaf, nn.Parameter) or self._is_computed(leaf)
            for leaf in tree_leaves(result) if sources or computed else ():
                if isinstance(leaf, Tensor):
                    if sources:
                        self._tag(leaf, sources)
                    if computed:
                        self._computed[id(leaf)] = weakref.ref(leaf)
            if sources and computed:
                self._check_rows(func, args, kwargs)
        if name is not None and bound is not None:
            self._record(name, bound, result)
        return result

    def _swap_target(self, name: str, bound: inspect.BoundArguments) -> None:
        targets, target_name = self._targets or [], _LOSSES[name][1]
        index, self._count = self._count, self._count + 1
        new = targets[index] if index < len(targets) else None
        if new is None or target_name is None:
            return
        old = bound.arguments.get(target_name)
        if not isinstance(old, Tensor) or new.shape != old.shape:
            was = list(old.shape) if isinstance(old, Tensor) else old
            raise TargetSwapError(
                f"the target of loss call {index} ({name}) is {was!r}, not of shape {list(new.shape)}"
            )
        bound.arguments[target_name] = new

    def _record(self, name: str, bound: inspect.BoundArguments, result: Any) -> None:
        if self._functions is not None and name not in self._functions:
            return
        output_name, target_name = _LOSSES[name]
        arguments = dict(bound.arguments)
        output = arguments.pop(output_name, None)
        target = arguments.pop(target_name, None) if target_name is not None else None
        if not isinstance(output, Tensor):
            return
        target = target if isinstance(target, Tensor) else None
        from_model = self._is_computed(target)
        target_keys = frozenset() if from_model else self._sources(target)
        parameters = bound.signature.parameters.items()
        kwargs = {k: p.default for k, p in parameters if k not in (output_name, target_name)} | arguments
        self.calls.append(
            LossCall(
                function=name,
                output=output,
                target=target,
                target_key=next(iter(target_keys)) if len(target_keys) == 1 else None,
                target_keys=target_keys,
                output_keys=self._sources(output),
                kwargs=kwargs,
                target_from_model=from_model,
                loss=result if isinstance(result, Tensor) else None,
                inspection=None if self._inspect is None else self._inspect(output),
                inspected=self._inspect is not None,
            )
        )

    def _check_rows(self, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Record a :class:`RowMix` when two tensors, a prediction and a tensor without gradient (a batch
        tensor, or one drawn from the model), broadcast with their sample axes (size :attr:`rows`, one each)
        on different axes."""
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor) and t.ndim >= 1]
        rows = self.rows
        if len(tensors) != 2 or rows is None or rows < 2:
            return
        try:
            width = len(torch.broadcast_shapes(tensors[0].shape, tensors[1].shape))
        except RuntimeError:
            return
        axes = [
            [k for k, size in enumerate((1,) * (width - t.ndim) + tuple(t.shape)) if size == rows]
            for t in tensors
        ]
        if any(len(found) != 1 for found in axes) or axes[0] == axes[1]:
            return
        computed = [self._is_computed(t) or isinstance(t, nn.Parameter) for t in tensors]
        if torch.is_grad_enabled():  # the other: a batch tensor, or one drawn from the model without grad
            computed = [t.requires_grad for t in tensors]
        if computed[0] == computed[1]:
            return
        prediction, other = (tensors[0], tensors[1]) if computed[0] else (tensors[1], tensors[0])
        keys = self._sources(other)
        if keys:
            name = getattr(func, "__name__", str(func)).strip("_")
            drawn = self._is_computed(other)
            self.mixed.append(RowMix(name, tuple(prediction.shape), tuple(other.shape), keys, rows, drawn))


def _bind(func: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None


@contextmanager
def record_loss_calls(
    inspect_input: Callable[[Tensor], Any] | None = None, batch: Any = None
) -> Generator[list[LossCall], None, None]:
    """Record each call of :data:`KINDS` in the block; ``inspect_input`` sees each prediction (a hook)."""
    with LossRecorder(batch, functions=KINDS, inspect_output=inspect_input) as recorder:
        yield recorder.calls


def loss_call_for(calls: Sequence[LossCall], loss: Tensor) -> LossCall | None:
    """The recorded call whose value is the returned ``loss`` (or its ``.mean()``); else ``None``."""
    value = loss.detach().reshape(-1)
    for call in reversed(calls):
        if call.loss is None or call.loss.numel() == 0:
            continue
        out = call.loss.detach().reshape(-1).to(value.dtype)
        if call.loss.numel() == 1 and (out is loss or bool(torch.equal(out, value))):  # sync: once per call
            return call
        if call.loss.numel() > 1 and bool(torch.isclose(out.mean(), value[0], rtol=1e-6, atol=0)):
            return call
    return None
