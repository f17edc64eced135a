"""The speed options :func:`~lightning_recipes.tune.speed_tune` measures, and the ways to apply a choice."""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn
from torch.utils.data import DataLoader, IterableDataset
from typing_extensions import override

from lightning_recipes._blocks import infer_block_classes, outermost_blocks
from lightning_recipes.harness import Harness
from lightning_recipes.harness.optimizers import optimizers_from_config

__all__ = [
    "OPTIONS",
    "ApplySpeedOptions",
    "SpeedOption",
    "apply_speed_options",
    "compile_targets",
    "loader_reason",
    "rebuild_loader",
    "resolve_options",
    "speed_loader",
]

_FUSABLE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)


@dataclass(frozen=True)
class SpeedOption:
    """One speed setting: ``trainer_kwargs``, ``loader_kwargs``, ``prepare`` (module -> module to fit),
    ``skip_reason(module, device)``, a ``context`` around the fit (``measure_context``: the measured fit
    only), its ``loss_rtol``, ``advice``, ``measure_memory`` and the options it ``conflicts`` with."""

    name: str
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    loader_kwargs: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[pl.LightningModule], Any] | None = None
    skip_reason: Callable[[pl.LightningModule, torch.device], str | None] | None = None
    context: Callable[[], AbstractContextManager[Any]] | None = None
    measure_context: Callable[[], AbstractContextManager[Any]] | None = None
    loss_rtol: float | None = None
    advice: str = ""
    measure_memory: bool = False
    conflicts: tuple[str, ...] = ()


def _has_conv2d(module: pl.LightningModule, _device: torch.device) -> str | None:
    if any(isinstance(m, nn.Conv2d) for m in module.modules()):
        return None
    return "no Conv2d in the model (channels_last only changes convolutions)"


def _cuda_only(what: str) -> Callable[[pl.LightningModule, torch.device], str | None]:
    def reason(_module: pl.LightningModule, device: torch.device) -> str | None:
        return None if device.type == "cuda" else f"{what} applies on CUDA only (device is {device.type})"

    return reason


def _bf16_reason(_module: pl.LightningModule, device: torch.device) -> str | None:
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16 support"
    return None


def _channels_last(module: pl.LightningModule) -> pl.LightningModule:
    return module.to(memory_format=torch.channels_last)  # type: ignore[call-arg]


def _has_forward(module: nn.Module) -> bool:
    return type(module).forward not in (nn.Module.forward, pl.LightningModule.forward)


def compile_targets(module: pl.LightningModule) -> list[nn.Module]:
    """What the ``compile`` options compile: the module when it has a ``forward``, else each child that has
    one and parameters (a wrapper whose ``training_step`` calls ``self.model(**batch)``).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> model = TinyClassifier()
        >>> compile_targets(model) == [model]
        True
    """
    if _has_forward(module):
        return [module]
    return [
        child for child in module.children() if _has_forward(child) and any(True for _ in child.parameters())
    ]


def _compile_reason(module: pl.LightningModule, _device: torch.device) -> str | None:
    if compile_targets(module):
        return None
    return "nothing to compile: the LightningModule has no forward and no child module with one"


def _compile_with(**kwargs: Any) -> Callable[[pl.LightningModule], Any]:
    def prepare(module: pl.LightningModule) -> Any:
        # in place: `trainer.fit(torch.compile(module))` fails in dynamo (torch 2.13, Lightning 2.6)
        for target in compile_targets(module):
            target.compile(**kwargs)
        return module

    return prepare


def _repeated_blocks(module: nn.Module) -> list[nn.Module]:
    return outermost_blocks(module, infer_block_classes(module))


def _blocks_reason(module: pl.LightningModule, _device: torch.device) -> str | None:
    try:
        classes = infer_block_classes(module)
    except ValueError:
        return "no repeated block in the model (no module type with parameters occurs twice)"
    if not any(True for block in _repeated_blocks(module) for _ in block.children()):
        names = ", ".join(cls.__name__ for cls in classes)
        return f"no repeated block with sub-modules in the model (the only repeated type is the leaf {names})"
    return None


def _compile_blocks(module: pl.LightningModule) -> Any:
    # one graph reused by every block of the same shape: compile time grows with distinct blocks, not depth
    for block in _repeated_blocks(module):
        block.compile()
    return module


def _checkpoint(module: pl.LightningModule) -> Any:
    from lightning_recipes.strategies import checkpoint_blocks

    checkpoint_blocks(module)
    return module


def _fusable(optimizer: torch.optim.Optimizer) -> bool:
    return type(optimizer) in _FUSABLE and not optimizer.defaults.get("fused")


def _fused_reason(module: pl.LightningModule, _device: torch.device) -> str | None:
    probe = copy.deepcopy(module)
    optimizers = Harness(probe).build_optimizers(probe).optimizers
    if any(_fusable(opt) for opt in optimizers):
        return None
    names = ", ".join(type(opt).__name__ for opt in optimizers) or "none"
    return f"no torch Adam/AdamW/SGD without fused=True among the optimizers ({names})"


def _fused(module: pl.LightningModule) -> pl.LightningModule:
    original = module.configure_optimizers

    def configure_optimizers(_self: pl.LightningModule) -> Any:
        config = original()
        for optimizer in optimizers_from_config(config):
            if _fusable(optimizer):  # before the first step: the state is created fused
                optimizer.defaults.update(fused=True, foreach=False)
                for group in optimizer.param_groups:
                    group.update(fused=True, foreach=False)
        return config

    module.configure_optimizers = types.MethodType(configure_optimizers, module)  # type: ignore[method-assign]
    return module


def _eager_random() -> AbstractContextManager[Any]:
    """Compiled code draws dropout masks from eager torch's RNG, so the loss check compares the same masks."""
    import torch._inductor.config as inductor_config  # a documented debugging switch of Inductor

    return inductor_config.patch(fallback_random=True)


@contextmanager
def _tf32() -> Iterator[None]:
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


#: The speed options :func:`~lightning_recipes.tune.speed_tune` measures, name -> :class:`SpeedOption`.
#: Applied in this order when combined: the model changes first, torch.compile last (it wraps the result).
OPTIONS: dict[str, SpeedOption] = {
    option.name: option
    for option in (
        SpeedOption(
            "channels_last",
            prepare=_channels_last,
            skip_reason=_has_conv2d,
            advice="model = model.to(memory_format=torch.channels_last)",
        ),
        SpeedOption(
            "fused_optimizer",
            prepare=_fused,
            skip_reason=_fused_reason,
            advice="pass fused=True to the Adam/AdamW/SGD in configure_optimizers",
        ),
        SpeedOption(
            "bf16-mixed", trainer_kwargs={"precision": "bf16-mixed"}, skip_reason=_bf16_reason, loss_rtol=0.05
        ),
        SpeedOption(
            "tf32",
            skip_reason=_cuda_only("TF32"),
            context=_tf32,
            advice='torch.set_float32_matmul_precision("high")',
        ),
        SpeedOption(
            "num_workers",
            loader_kwargs={"num_workers": 2, "persistent_workers": True},
            advice="DataLoader(..., num_workers=2, persistent_workers=True)",
        ),
        SpeedOption(
            "pin_memory",
            loader_kwargs={"pin_memory": True},
            skip_reason=_cuda_only("pin_memory"),
            advice="DataLoader(..., pin_memory=True)",
        ),
        SpeedOption(
            "activation_checkpointing",
            prepare=_checkpoint,
            skip_reason=_blocks_reason,
            advice="checkpoint_blocks(model) or ActivationCheckpointingMixin (lightning_recipes.strategies)",
            measure_memory=True,
            conflicts=("compile", "compile_blocks", "compile_cudagraphs"),
        ),
        SpeedOption(
            "compile_blocks",
            prepare=_compile_blocks,
            skip_reason=_blocks_reason,
            measure_context=_eager_random,
            advice="block.compile() for each repeated block before trainer.fit",
            conflicts=("compile", "compile_cudagraphs"),
        ),
        SpeedOption(
            "compile",
            prepare=_compile_with(),
            skip_reason=_compile_reason,
            measure_context=_eager_random,
            advice="model.compile() before trainer.fit (no forward: compile the module training_step calls)",
            conflicts=("compile_blocks", "compile_cudagraphs"),
        ),
        SpeedOption(
            "compile_cudagraphs",
            prepare=_compile_with(mode="reduce-overhead"),
            skip_reason=lambda m, d: (
                _cuda_only("torch.compile with CUDA graphs")(m, d) or _compile_reason(m, d)
            ),
            measure_context=_eager_random,
            advice='model.compile(mode="reduce-overhead") before trainer.fit',
            conflicts=("compile", "compile_blocks"),
        ),
    )
}


def resolve_options(options: Any) -> list[SpeedOption]:
    if options is None:
        return list(OPTIONS.values())
    if isinstance(options, (str, SpeedOption)) or not isinstance(options, Sequence):
        raise TypeError(f"`options` must be a list of option names or SpeedOption, got {options!r}.")
    resolved = []
    for option in options:
        if isinstance(option, SpeedOption):
            resolved.append(option)
        elif option in OPTIONS:
            resolved.append(OPTIONS[option])
        else:
            raise ValueError(
                f"`options` must name options from {sorted(OPTIONS)} (or be SpeedOption), got {option!r}."
            )
    names = [option.name for option in resolved]
    if "baseline" in names or len(set(names)) != len(names):
        raise ValueError(f"`options` must have distinct names other than 'baseline', got {names!r}.")
    return resolved


def rebuild_loader(loader: Any, loader_kwargs: dict[str, Any], batch_sampler: Any = None) -> Any:
    """``loader`` rebuilt with ``loader_kwargs`` (the same batches and shuffle, or ``batch_sampler``)."""
    if not loader_kwargs and batch_sampler is None:
        return loader
    if not isinstance(loader, DataLoader):
        raise TypeError(f"`loader` must be a torch DataLoader to rebuild, got {type(loader).__name__}.")
    batching: dict[str, Any] = (
        {"batch_size": loader.batch_size, "drop_last": loader.drop_last}  # its sampler is torch's own
        if isinstance(loader.dataset, IterableDataset)
        else {"batch_sampler": batch_sampler or loader.batch_sampler}
    )
    return DataLoader(
        loader.dataset,
        **batching,
        collate_fn=loader.collate_fn,
        worker_init_fn=loader.worker_init_fn,
        generator=loader.generator,  # the iterator draws its base seed from it: keeps the shuffle in step
        **loader_kwargs,
    )


def loader_reason(loader: Any, loader_kwargs: dict[str, Any]) -> str | None:
    if not isinstance(loader, DataLoader):
        return f"the training data is a {type(loader).__name__}, not a torch DataLoader to rebuild"
    if isinstance(loader.dataset, IterableDataset) and loader_kwargs.get("num_workers", 0) > 0:
        return (
            "the training data is an IterableDataset: its batches change with the number of workers (each "
            "worker yields the share the dataset gives it), so the loss check cannot compare them"
        )
    return None


def _ordered(options: Sequence[str | SpeedOption]) -> list[SpeedOption]:
    """Resolved, in :data:`OPTIONS` order; others after."""
    resolved = resolve_options(list(options))
    order = list(OPTIONS)
    return sorted(resolved, key=lambda opt: order.index(opt.name) if opt.name in order else len(order))


def apply_speed_options(
    model: pl.LightningModule, options: Sequence[str | SpeedOption]
) -> pl.LightningModule:
    """Apply the module-side part (``prepare``) of ``options`` to ``model`` in place; returns ``model``.

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import DigitsCNN
        >>> model = apply_speed_options(DigitsCNN(width=4), ["channels_last"])
        >>> model.features[0].weight.is_contiguous(memory_format=torch.channels_last)
        True
    """
    if not isinstance(model, pl.LightningModule):
        raise TypeError(f"`model` must be a LightningModule, got {type(model).__name__}.")
    for option in _ordered(options):
        if option.prepare is not None:
            changed = option.prepare(model)
            if changed is not model:
                raise ValueError(
                    f"`options`: {option.name!r} returns a new object instead of changing the model in "
                    "place; apply it by hand."
                )
    return model


def speed_loader(loader: DataLoader, options: Sequence[str | SpeedOption]) -> DataLoader:
    """A copy of ``loader`` with the loader arguments of ``options`` (the same batches and shuffle).

    Example:
        >>> from lightning_recipes.testing import random_classification_loader
        >>> speed_loader(random_classification_loader(), ["num_workers"]).num_workers
        2
    """
    return rebuild_loader(
        loader, {k: v for option in _ordered(options) for k, v in option.loader_kwargs.items()}
    )


class ApplySpeedOptions(Callback):
    """Apply the speed ``options`` chosen by :func:`~lightning_recipes.tune.speed_tune` in ``fit``:
    the module-side ones and global settings at ``setup`` (undone at ``teardown``); a warning at train start
    for a chosen loader or precision setting the run lacks.

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import DigitsCNN, fast_trainer
        >>> from lightning_recipes.data import DigitsDataModule
        >>> model = DigitsCNN(width=4)
        >>> trainer = fast_trainer(max_steps=2, callbacks=[ApplySpeedOptions(["channels_last"])])
        >>> trainer.fit(model, datamodule=DigitsDataModule())
        >>> model.features[0].weight.is_contiguous(memory_format=torch.channels_last)
        True
    """

    def __init__(self, options: list[str]) -> None:
        super().__init__()
        if isinstance(options, str) or not all(isinstance(name, str) for name in options):
            raise TypeError(f"`options` must be a list of option names, got {options!r}.")
        self.options = list(options)
        self._resolved = _ordered(self.options)  # validates the names now
        self._applied_to: int | None = None
        self._contexts: ExitStack | None = None

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        if self._applied_to != id(pl_module):
            apply_speed_options(pl_module, self._resolved)
            self._applied_to = id(pl_module)
        if self._contexts is None:
            self._contexts = ExitStack()
            for option in self._resolved:
                if option.context is not None:
                    self._contexts.enter_context(option.context())

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        loader = trainer.train_dataloader
        missing = []
        for option in self._resolved:
            for key, value in option.loader_kwargs.items():
                if isinstance(loader, DataLoader) and getattr(loader, key, value) != value:
                    missing.append(f"{key}={value!r} (the loader has {getattr(loader, key)!r})")
            wanted = option.trainer_kwargs.get("precision")
            if wanted is not None and str(trainer.precision) != str(wanted):
                missing.append(f"Trainer(precision={wanted!r}) (the Trainer has {trainer.precision!r})")
        if missing:
            rank_zero_warn(
                f"`ApplySpeedOptions({self.options})` cannot set these, and the run lacks them: "
                f"{'; '.join(missing)}. Pass the speed_tune result's `.loader_kwargs` to the DataLoader and "
                "its `.trainer_kwargs` to the Trainer."
            )

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit" and self._contexts is not None:
            self._contexts.close()
            self._contexts = None
