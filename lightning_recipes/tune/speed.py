"""Speed tuning on the user's model: each speed option trains a copy for a few real steps, timed and checked.

:func:`speed_tune` trains a deep copy of the module for ``warmup_steps + measure_steps`` steps once per option
(and once as the baseline), in repeats that interleave the options so that a load change on the machine hits
every option alike, and compares the median step time and the loss trajectory with the baseline's. The
options that do not apply on the device are listed as skipped, with the reason. The result names the fastest
combination of options that were each faster and kept the loss, re-measured against the baseline together.

Memory is measured too: on CUDA the allocator's peak of every run; on any device, for the baseline and the
options that exist for their memory (activation checkpointing), the activation bytes a step keeps for
backward and the step's peak, counted tensor by tensor
(:func:`~lightning_recipes.strategies.measure_step_memory`).
"""

from __future__ import annotations

import copy
import logging
import statistics
import time
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn
from torch.utils.data import DataLoader, IterableDataset
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int, check_positive
from lightning_recipes.checks import CheckContext, preserved_loader_rng, resolve_fit_data

__all__ = [
    "OPTIONS",
    "SpeedOption",
    "SpeedRow",
    "SpeedTuneResult",
    "StepTimer",
    "compile_targets",
    "speed_tune",
]

_FUSABLE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)


@dataclass(frozen=True)
class SpeedOption:
    """One speed setting: how it changes the module, the loader and the Trainer, and when it does not apply.

    Args:
        name: The option's name in the table.
        trainer_kwargs: Extra ``Trainer`` arguments (``precision``).
        loader_kwargs: ``DataLoader`` arguments the training loader is rebuilt with (``num_workers``).
        prepare: Turns the module copy into the module to fit (``channels_last``, ``torch.compile``).
        skip_reason: ``(module, device) -> reason`` when the option does not apply, else ``None``.
        context: A context manager around the fit (TF32 switches a global flag and restores it).
        loss_rtol: The relative loss tolerance for this option (``None``: the call's ``loss_rtol``).
        advice: What to write in the training script to apply it (for :meth:`SpeedTuneResult.to_yaml`).
        measure_memory: Also count the activation and peak bytes of one step of the prepared copy (for an
            option whose point is memory, such as activation checkpointing).
        conflicts: Names of options it is never combined with (two ways of compiling the same code; activation
            checkpointing under compile, which this tool does not check); of two that conflict, the
            combination keeps the faster.
    """

    name: str
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    loader_kwargs: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[pl.LightningModule], Any] | None = None
    skip_reason: Callable[[pl.LightningModule, torch.device], str | None] | None = None
    context: Callable[[], AbstractContextManager[Any]] | None = None
    loss_rtol: float | None = None
    advice: str = ""
    measure_memory: bool = False
    conflicts: tuple[str, ...] = ()


@dataclass
class SpeedRow:
    """One row: ``status`` is ``faster``, ``not faster`` (under ``min_speedup``), ``slower``, ``skipped: ...``
    or ``incorrect: ...``.

    Memory columns (``None`` where not measured): ``activation_mb`` is what one step's forward pass keeps for
    backward and ``step_peak_mb`` that step's peak over every tensor, both counted by ``MemTracker`` for the
    baseline and the options with ``measure_memory``; ``cuda_peak_mb`` is the CUDA allocator's peak over the
    whole run (the largest over repeats), for every row on CUDA.
    """

    option: str
    status: str
    step_ms: float | None = None
    speedup: float | None = None
    loss_deviation: float | None = None
    loss_rtol: float | None = None
    first_step_ms: float | None = None
    activation_mb: float | None = None
    step_peak_mb: float | None = None
    cuda_peak_mb: float | None = None


@dataclass
class SpeedTuneResult:
    """The outcome of :func:`speed_tune`.

    Attributes:
        rows: One :class:`SpeedRow` per option, the baseline first; last, when two or more options were
            faster, the combination of them (``"a+b"``), re-measured.
        best: The names of the chosen options (empty: the default Trainer is fastest).
        best_speedup: The chosen combination's speed-up over the baseline, re-measured (1.0 when empty).
        advice: Per chosen option, what to apply outside the Trainer arguments.
        trainer_kwargs: The ``Trainer`` arguments of the chosen options.
    """

    rows: list[SpeedRow]
    best: list[str] = field(default_factory=list)
    best_speedup: float = 1.0
    advice: dict[str, str] = field(default_factory=dict)
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_yaml(self) -> str:
        """The LightningCLI fragment for the chosen options, the non-Trainer ones as comments.

        Example:
            >>> SpeedTuneResult([], ["bf16-mixed"], 1.3, {}, {"precision": "bf16-mixed"}).to_yaml()
            'trainer:\\n  precision: bf16-mixed\\n'
        """
        lines = ["trainer:"] + [f"  {key}: {value}" for key, value in self.trainer_kwargs.items()]
        if len(lines) == 1:
            lines = ["trainer: {}"]
        lines += [f"# {name}: {text}" for name, text in self.advice.items() if text]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [dict(vars(row)) for row in self.rows],
            "best": list(self.best),
            "best_speedup": self.best_speedup,
            "trainer_kwargs": dict(self.trainer_kwargs),
            "advice": dict(self.advice),
        }

    def table(self) -> Any:
        """The rows as a ``rich.table.Table``."""
        from rich.table import Table

        table = Table(
            title=f"speed_tune (best: {', '.join(self.best) or 'baseline'}, x{self.best_speedup:.2f})"
        )
        columns = ["option", "status", "step ms", "speed-up", "loss dev. (tol)", "first step ms"]
        memory = {
            "activation_mb": "act. MiB",
            "step_peak_mb": "step peak MiB",
            "cuda_peak_mb": "CUDA peak MiB",
        }
        shown = [key for key in memory if any(getattr(row, key) is not None for row in self.rows)]
        for column in columns + [memory[key] for key in shown]:
            table.add_column(column)
        for row in self.rows:
            table.add_row(
                row.option,
                row.status,
                _fmt(row.step_ms, ".2f"),
                _fmt(row.speedup, ".2f"),
                f"{_fmt(row.loss_deviation, '.2e')} ({_fmt(row.loss_rtol, '.0e')})",
                _fmt(row.first_step_ms, ".0f"),
                *(_fmt(getattr(row, key), ".2f") for key in shown),
            )
        return table


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _has_conv2d(module: pl.LightningModule, _device: torch.device) -> str | None:
    if any(isinstance(m, nn.Conv2d) for m in module.modules()):
        return None
    return "no Conv2d in the model (channels_last only changes convolutions)"


def _cuda_only(what: str) -> Callable[[pl.LightningModule, torch.device], str | None]:
    def reason(_module: pl.LightningModule, device: torch.device) -> str | None:
        return None if device.type == "cuda" else f"{what} applies on CUDA only (device is {device.type})"

    return reason


def _all_of(
    *reasons: Callable[[pl.LightningModule, torch.device], str | None],
) -> Callable[[pl.LightningModule, torch.device], str | None]:
    def reason(module: pl.LightningModule, device: torch.device) -> str | None:
        return next((text for check in reasons if (text := check(module, device))), None)

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
    """What the ``compile`` options compile: the LightningModule itself when it has a ``forward``; else (a
    wrapper whose ``training_step`` calls ``self.model(**batch)``, as with Hugging Face models) each child
    module that has a ``forward`` and parameters.

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
        # In place (nn.Module.compile): the Trainer gets the LightningModule itself, whose calls run compiled.
        # (`trainer.fit(torch.compile(module))` failed in dynamo with torch 2.13 + Lightning 2.6 on CPU:
        # "'method' object has no attribute '__dict__'"; in place is also what the advice tells the user.)
        for target in compile_targets(module):
            target.compile(**kwargs)
        return module

    return prepare


def _repeated_blocks(module: nn.Module) -> list[nn.Module]:
    """The outermost instances of the model's repeated block type (the FSDP presets' inference)."""
    from lightning_recipes.strategies import infer_block_classes, outermost_blocks

    return outermost_blocks(module, infer_block_classes(module))


def _blocks_reason(module: pl.LightningModule, _device: torch.device) -> str | None:
    from lightning_recipes.strategies import infer_block_classes

    try:
        classes = infer_block_classes(module)
    except ValueError:
        return "no repeated block in the model (no module type with parameters occurs twice)"
    if not any(True for block in _repeated_blocks(module) for _ in block.children()):
        names = ", ".join(cls.__name__ for cls in classes)
        return f"no repeated block with sub-modules in the model (the only repeated type is the leaf {names})"
    return None


def _compile_blocks(module: pl.LightningModule) -> Any:
    # Each block compiled in place: one compiled graph reused by every block of the same shape, so compile
    # time grows with the number of distinct blocks, not with the depth.
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
    optimizers, _ = CheckContext(probe).build_optimizers(probe)
    if any(_fusable(opt) for opt in optimizers):
        return None
    names = ", ".join(type(opt).__name__ for opt in optimizers) or "none"
    return f"no torch Adam/AdamW/SGD without fused=True among the optimizers ({names})"


def _optimizers_in(config: Any) -> list[torch.optim.Optimizer]:
    if isinstance(config, torch.optim.Optimizer):
        return [config]
    if isinstance(config, dict):
        return _optimizers_in(config.get("optimizer"))
    if isinstance(config, (list, tuple)):
        return [opt for item in config for opt in _optimizers_in(item)]
    return []


def _fused(module: pl.LightningModule) -> pl.LightningModule:
    original = module.configure_optimizers

    def configure_optimizers(_self: pl.LightningModule) -> Any:
        config = original()
        for optimizer in _optimizers_in(config):
            if _fusable(optimizer):  # before the first step: the state is created fused
                optimizer.defaults.update(fused=True, foreach=False)
                for group in optimizer.param_groups:
                    group.update(fused=True, foreach=False)
        return config

    module.configure_optimizers = types.MethodType(configure_optimizers, module)  # type: ignore[method-assign]
    return module


def _eager_random() -> AbstractContextManager[Any]:
    """Compiled code draws dropout masks from eager torch's RNG stream (Inductor has its own by default), so
    that the loss check compares the same masks; without it every model with dropout would read 'incorrect'.
    """
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


# Applied in this order when combined: the model changes first, torch.compile last (it wraps the result).
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
            context=_eager_random,
            advice="block.compile() for each repeated block before trainer.fit",
            conflicts=("compile", "compile_cudagraphs"),
        ),
        SpeedOption(
            "compile",
            prepare=_compile_with(),
            skip_reason=_compile_reason,
            context=_eager_random,
            advice="model.compile() before trainer.fit (no forward: compile the module training_step calls)",
            conflicts=("compile_blocks", "compile_cudagraphs"),
        ),
        SpeedOption(
            "compile_cudagraphs",
            prepare=_compile_with(mode="reduce-overhead"),
            skip_reason=_all_of(_cuda_only("torch.compile with CUDA graphs"), _compile_reason),
            context=_eager_random,
            advice='model.compile(mode="reduce-overhead") before trainer.fit',
            conflicts=("compile", "compile_blocks"),
        ),
    )
}


class StepTimer(Callback):
    """Wall time at train start and at every batch end (so a step's time includes its data loading), and each
    step's loss (detached, on the device).

    Syncs: on CUDA, one ``torch.cuda.synchronize`` per step, so that a step's time includes its GPU work (a
    timing tool, not for a production run).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> timer = StepTimer()
        >>> fast_trainer(max_steps=3, callbacks=[timer]).fit(TinyClassifier(), random_classification_loader())
        >>> len(timer.ends), len(timer.losses)
        (3, 3)
    """

    def __init__(self) -> None:
        self.start = 0.0
        self.ends: list[float] = []
        self.losses: list[torch.Tensor] = []

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start = time.perf_counter()

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)  # sync: the step's time includes its GPU work
        self.ends.append(time.perf_counter())
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(loss.detach().float().clone())


@dataclass
class _Run:
    step_ms: float
    first_step_ms: float
    losses: list[float]
    cuda_peak_bytes: int | None = None


def _rebuild_loader(loader: Any, loader_kwargs: dict[str, Any]) -> Any:
    if not loader_kwargs:
        return loader
    if not isinstance(loader, DataLoader):
        raise TypeError(f"the loader options need a torch DataLoader, got {type(loader).__name__}")
    batching: dict[str, Any] = (
        {"batch_size": loader.batch_size, "drop_last": loader.drop_last}  # its sampler is torch's own
        if isinstance(loader.dataset, IterableDataset)
        else {"batch_sampler": loader.batch_sampler}
    )
    return DataLoader(
        loader.dataset,
        **batching,
        collate_fn=loader.collate_fn,
        worker_init_fn=loader.worker_init_fn,
        generator=loader.generator,  # the iterator draws its base seed from it: keeps the shuffle in step
        **loader_kwargs,
    )


def _loader_reason(loader: Any, loader_kwargs: dict[str, Any]) -> str | None:
    if not isinstance(loader, DataLoader):
        return f"the training data is a {type(loader).__name__}, not a torch DataLoader to rebuild"
    if isinstance(loader.dataset, IterableDataset) and loader_kwargs.get("num_workers", 0) > 0:
        return (
            "the training data is an IterableDataset: its batches change with the number of workers (each "
            "worker yields the share the dataset gives it), so the loss check cannot compare them"
        )
    return None


@contextmanager
def _quiet_trainer() -> Iterator[None]:
    """No per-run Trainer banners ("GPU available", "max_steps reached") nor the no-val-loader warning."""
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*`val_dataloader`.*")
            yield
    finally:
        logger.setLevel(level)


def _run(
    copy_model: Callable[[], pl.LightningModule],
    loader: Any,
    options: Sequence[SpeedOption],
    *,
    warmup_steps: int,
    measure_steps: int,
    accelerator: str,
    seed: int,
) -> _Run:
    trainer_kwargs: dict[str, Any] = {}
    loader_kwargs: dict[str, Any] = {}
    for option in options:
        trainer_kwargs.update(option.trainer_kwargs)
        loader_kwargs.update(option.loader_kwargs)
    timer = StepTimer()
    with preserved_loader_rng(loader), _quiet_trainer(), ExitStack() as stack:  # same shuffle every run
        for option in options:
            stack.enter_context(option.context() if option.context else nullcontext())
        torch.manual_seed(seed)  # the same data order and dropout masks for every option
        module: Any = copy_model()
        for option in options:
            if option.prepare is not None:
                module = option.prepare(module)
        trainer = pl.Trainer(
            accelerator=accelerator,
            devices=1,
            max_steps=warmup_steps + measure_steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
            callbacks=[timer],
            **trainer_kwargs,
        )
        on_cuda = accelerator == "gpu"
        if on_cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        trainer.fit(module, train_dataloaders=_rebuild_loader(loader, loader_kwargs))
        cuda_peak = torch.cuda.max_memory_allocated() if on_cuda else None
    steps = [b - a for a, b in zip(timer.ends, timer.ends[1:])]
    measured = steps[warmup_steps - 1 :] if warmup_steps > 0 else steps
    losses = torch.stack(timer.losses).cpu().tolist()  # sync: once, after the run
    return _Run(
        step_ms=1e3 * statistics.median(measured),
        first_step_ms=1e3 * (timer.ends[0] - timer.start),
        losses=losses,
        cuda_peak_bytes=cuda_peak,
    )


def _step_memory(
    context: CheckContext, options: Sequence[SpeedOption], seed: int
) -> tuple[float, float] | None:
    """(activation MiB, step peak MiB) of one training step of a prepared copy, counted by ``MemTracker``;
    ``None`` when the count fails (a tensor subclass or compiled code it cannot follow)."""
    from lightning_recipes.checks import preserved_rng
    from lightning_recipes.strategies import measure_step_memory

    batch = context.train_batches(1)[0]
    with preserved_rng():
        torch.manual_seed(seed)
        module: Any = context.copy_model()
        for option in options:
            if option.prepare is not None:
                module = option.prepare(module)
        try:
            memory = measure_step_memory(module, batch)
        except Exception as err:  # a failed count leaves the timing rows as they are
            names = [option.name for option in options] or ["baseline"]
            rank_zero_warn(f"speed_tune could not count the step memory of {names}: {err}")
            return None
    return memory.activations / 2**20, memory.peak / 2**20


def _deviation(losses: list[float], reference: list[float]) -> float:
    """The largest relative difference between two loss trajectories, step by step."""
    if len(losses) != len(reference):
        return float("inf")
    worst = 0.0
    for value, ref in zip(losses, reference):
        if value != value:  # NaN
            return float("inf")
        worst = max(worst, abs(value - ref) / max(abs(ref), 1e-8))
    return worst


def _resolve(options: Any) -> list[SpeedOption]:
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


def speed_tune(
    model: pl.LightningModule,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    *,
    options: Sequence[str | SpeedOption] | None = None,
    warmup_steps: int = 3,
    measure_steps: int = 10,
    repeats: int = 3,
    loss_rtol: float = 0.02,
    min_speedup: float = 1.03,
    device: torch.device | str | None = None,
    seed: int = 0,
) -> SpeedTuneResult:
    """Measure which speed options make a copy of ``model`` train faster without changing its loss.

    Each option (default: all of :data:`OPTIONS`) and the baseline train a deep copy for
    ``warmup_steps + measure_steps`` steps with a plain Trainer, ``repeats`` times, interleaved. An option's
    step time is the median of its steps after the warm-up (the first step, where ``torch.compile``
    compiles, is reported apart); its speed-up is the median over repeats of the baseline's step time over
    its own in the same repeat. Its loss trajectory must stay within ``loss_rtol`` (relative, every step) of
    the baseline's, else it is ``incorrect`` (``bf16-mixed`` uses its own looser tolerance, shown in the
    row). The options that were faster and correct are then combined and re-measured against the baseline
    (``repeats`` times; of two options that compile the same code, only the faster joins); the combination
    is kept only if it is still faster and correct, else the single fastest option is. The model, the RNG
    streams and the loader are left as they were.

    Memory: when an option with ``measure_memory`` runs (``activation_checkpointing``), its row and the
    baseline's get ``activation_mb`` and ``step_peak_mb``, counted on one step of a copy, so the table shows
    what checkpointing saves next to what it costs in time. On CUDA every row also gets ``cuda_peak_mb``.
    Activation checkpointing is slower by design (it recomputes each block's forward in backward); it is in
    the table for the memory it saves and is chosen only if it is also faster.

    Cost: ``(1 + options) * repeats + 2 * repeats`` short fits; one host sync per step for CUDA timing.

    Args:
        model: A ``LightningModule`` with automatic optimisation.
        datamodule: Its ``setup("fit")`` and ``train_dataloader()`` give the data.
        train_dataloaders: The training loader when there is no datamodule (default: the model's own).
        options: Option names from :data:`OPTIONS` or :class:`SpeedOption` objects (default: all).
        warmup_steps: Steps not timed (compilation, allocator and cache warm-up), an int >= 1.
        measure_steps: Steps timed, an int >= 2.
        repeats: Interleaved repeats of every option, an int >= 1.
        loss_rtol: Relative loss tolerance against the baseline's trajectory, > 0.
        min_speedup: The speed-up an option needs to count as ``faster``, >= 1 (a margin over timing noise;
            below it and above 1 the row reads ``not faster``).
        device: Where the copies train (default: the model's device).
        seed: Seed of every run (the same data order and initial RNG for all options).

    Returns:
        A :class:`SpeedTuneResult`: ``.rows``, ``.best``, ``.trainer_kwargs``, ``.to_yaml()``, ``.table()``.

    Raises:
        ValueError: For an argument out of range (naming it) or no training data.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = speed_tune(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...                     options=["pin_memory"], measure_steps=2, repeats=1)
        >>> [(row.option, row.status.split(":")[0]) for row in result.rows]
        [('baseline', 'baseline'), ('pin_memory', 'skipped')]
    """
    check_int("warmup_steps", warmup_steps, minimum=1)
    check_int("measure_steps", measure_steps, minimum=2)
    check_int("repeats", repeats, minimum=1)
    check_positive("loss_rtol", loss_rtol)
    check_in_range("min_speedup", min_speedup, 1.0, float("inf"))
    check_int("seed", seed)
    if not isinstance(model, pl.LightningModule):
        raise TypeError(f"`model` must be a LightningModule, got {type(model).__name__}.")
    resolved = _resolve(options)
    train_dataloaders = resolve_fit_data("speed_tune", model, datamodule, train_dataloaders).train
    target = torch.device(device) if device is not None else model.device
    accelerator = "gpu" if target.type == "cuda" else target.type
    # copy_model: a deep copy on `target` sharing the datamodule and loaders, with no Trainer attached
    context = CheckContext(model, train_dataloaders, device=target, datamodule=datamodule, seed=seed)

    skipped: dict[str, str] = {}
    for option in resolved:
        reason = option.skip_reason(model, target) if option.skip_reason else None
        if not reason and option.loader_kwargs:
            reason = _loader_reason(train_dataloaders, option.loader_kwargs)
        if reason:
            skipped[option.name] = reason
    active = [option for option in resolved if option.name not in skipped]

    def measure(configs: dict[str, list[SpeedOption]]) -> dict[str, list[_Run]]:
        runs: dict[str, list[_Run]] = {name: [] for name in configs}
        for _ in range(repeats):
            for name, config in configs.items():
                runs[name].append(
                    _run(
                        context.copy_model,
                        train_dataloaders,
                        config,
                        warmup_steps=warmup_steps,
                        measure_steps=measure_steps,
                        accelerator=accelerator,
                        seed=seed,
                    )
                )
        return runs

    runs = measure({"baseline": [], **{option.name: [option] for option in active}})
    base = runs["baseline"]
    rows = [SpeedRow("baseline", "baseline", _median_ms(base), 1.0, 0.0, loss_rtol, _first(base))]
    base_peaks = [run.cuda_peak_bytes for run in base if run.cuda_peak_bytes is not None]
    rows[0].cuda_peak_mb = max(base_peaks) / 2**20 if base_peaks else None
    good: list[tuple[float, SpeedOption]] = []
    for option in resolved:
        if option.name in skipped:
            rows.append(SpeedRow(option.name, f"skipped: {skipped[option.name]}"))
            continue
        row, speedup = _row(option.name, runs[option.name], base, option.loss_rtol or loss_rtol, min_speedup)
        rows.append(row)
        if row.status == "faster":
            good.append((speedup, option))
    if any(option.measure_memory for option in active):
        by_name = {option.name: option for option in active}
        for row in rows:
            counted_option = by_name.get(row.option)
            if row.option == "baseline" or (counted_option is not None and counted_option.measure_memory):
                counted = _step_memory(context, [counted_option] if counted_option else [], seed)
                if counted is not None:
                    row.activation_mb, row.step_peak_mb = counted

    result = SpeedTuneResult(rows)
    chosen: list[SpeedOption] = []
    faster = _without_conflicts(good)
    if len(faster) > 1:
        combo = [option for option in resolved if option.name in faster]
        again = measure({"baseline": [], "combination": combo})
        rtol = max(option.loss_rtol or loss_rtol for option in combo)
        name = "+".join(option.name for option in combo)
        row, speedup = _row(name, again["combination"], again["baseline"], rtol, min_speedup)
        result.rows.append(row)  # the re-measurement, shown last (its ratio is against its own baseline runs)
        if row.status == "faster" and speedup > max(s for s, _ in good):
            chosen, result.best_speedup = combo, speedup
    if good and not chosen:
        result.best_speedup, best = max(good, key=lambda pair: pair[0])
        chosen = [best]
    result.best = [option.name for option in chosen]
    for option in chosen:
        result.trainer_kwargs.update(option.trainer_kwargs)
        if option.advice:
            result.advice[option.name] = option.advice
    return result


def _without_conflicts(good: list[tuple[float, SpeedOption]]) -> set[str]:
    """The names of the faster options that can run together: of two that conflict, the faster stays."""
    kept: list[SpeedOption] = []
    for _, option in sorted(good, key=lambda pair: -pair[0]):
        if not any(option.name in other.conflicts or other.name in option.conflicts for other in kept):
            kept.append(option)
    return {option.name for option in kept}


def _median_ms(runs: list[_Run]) -> float:
    return statistics.median(run.step_ms for run in runs)


def _first(runs: list[_Run]) -> float:
    return max(run.first_step_ms for run in runs)  # the first repeat compiles; later ones hit the cache


def _row(
    name: str, runs: list[_Run], base: list[_Run], rtol: float, min_speedup: float
) -> tuple[SpeedRow, float]:
    speedup = statistics.median(b.step_ms / r.step_ms for b, r in zip(base, runs))
    deviation = max(_deviation(run.losses, base[0].losses) for run in runs)
    if deviation > rtol:
        status = (
            f"incorrect: loss deviates {deviation:.2g} (relative) from the baseline, tolerance {rtol:.2g}"
        )
    else:
        status = "faster" if speedup >= min_speedup else "slower" if speedup <= 1.0 else "not faster"
    row = SpeedRow(name, status, _median_ms(runs), speedup, deviation, rtol, _first(runs))
    peaks = [run.cuda_peak_bytes for run in runs if run.cuda_peak_bytes is not None]
    row.cuda_peak_mb = max(peaks) / 2**20 if peaks else None
    return row, speedup
