"""Mixup / CutMix as a batch recipe: seeded per-batch draws, soft targets, a LightningModule mixin."""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor

from lightning_recipes._checkpoint import plain_hyperparameters, rebuild_hyperparameters, register_plain_type
from lightning_recipes._validation import check_bool, check_in_range, check_int, check_non_negative

__all__ = ["BatchMixer", "BatchMixingMixin", "MixDraw", "cutmix_box", "mix_seed", "sample_beta"]

_CHECKPOINT_KEY = "batch_mixer"


def mix_seed(seed: int, rank: int, index: int) -> int:
    """The seed of batch ``index`` on ``rank``: a 63-bit BLAKE2b hash of the three numbers, so the stream
    needs no generator state beyond ``index`` and a skipped batch never shifts the others' draws.

    Example:
        >>> mix_seed(0, 0, 0) == mix_seed(0, 0, 0) != mix_seed(0, 1, 0)
        True
    """
    digest = hashlib.blake2b(f"{seed}/{rank}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sample_beta(alpha: float, generator: torch.Generator) -> float:
    """One draw of ``Beta(alpha, alpha)`` on the host from two float64 ``Gamma(alpha, 1)`` draws of the CPU
    ``generator`` (1.0, no mixing, if both underflow to 0).

    Example:
        >>> lam = sample_beta(1.0, torch.Generator().manual_seed(0))
        >>> 0.0 <= lam <= 1.0
        True
    """
    gammas = torch._standard_gamma(torch.full((2,), float(alpha), dtype=torch.float64), generator=generator)
    first, total = float(gammas[0]), float(gammas.sum())  # CPU tensors: no device sync
    return first / total if total > 0.0 else 1.0


def cutmix_box(lam: float, height: int, width: int, generator: torch.Generator) -> tuple[int, int, int, int]:
    """CutMix's box ``(y1, y2, x1, x2)`` as in Yun et al.'s code: side ratio ``sqrt(1 - lam)``, centre uniform
    over the pixels, clipped to the image.

    Example:
        >>> cutmix_box(0.75, 8, 8, torch.Generator().manual_seed(0))  # clipped at the bottom: 3 rows, not 4
        (5, 8, 2, 6)
    """
    ratio = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * ratio), int(width * ratio)
    cx = int(torch.randint(width, (1,), generator=generator))
    cy = int(torch.randint(height, (1,), generator=generator))
    y1, y2 = min(max(cy - cut_h // 2, 0), height), min(max(cy + cut_h // 2, 0), height)
    x1, x2 = min(max(cx - cut_w // 2, 0), width), min(max(cx + cut_w // 2, 0), width)
    return y1, y2, x1, x2


@dataclass(frozen=True)
class MixDraw:
    """What batch ``index`` was mixed with: whether it was ``applied``, the ``mode`` (``"mixup"``,
    ``"cutmix"``, ``"none"``), ``lam`` (each sample's own weight, after the CutMix correction), the
    ``permutation`` (a CPU tensor: sample ``i`` mixed with ``permutation[i]``) and CutMix's ``box``.
    """

    index: int
    applied: bool
    mode: str
    lam: float
    permutation: Tensor
    box: tuple[int, int, int, int] | None = None


@dataclass(eq=False)
class BatchMixer:
    r"""Mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019) for one batch at a time, with soft targets.

    With probability ``prob`` a batch is mixed, by CutMix with probability ``switch_prob`` when both alphas
    are set (timm's rule), ``lam ~ Beta(alpha, alpha)`` and a random pairing ``perm``: Mixup ``lam * x + (1 -
    lam) * x[perm]``; CutMix pastes :func:`cutmix_box` from ``x[perm]`` (``correct_lam``: ``lam`` from the
    clipped box). Targets become ``lam * onehot(y) + (1 - lam) * onehot(y[perm])`` (``(N, C)`` float32;
    unmixed batches: plain one-hot), for :func:`lightning_recipes.losses.mixed_cross_entropy`. ``input_key``
    / ``target_key`` locate them in a batch. No sync, no in-place change. Seeds, ``sync_across_ranks``,
    resuming and the differences from timm: ``docs/guides/mixing.md``.

    Example:
        >>> mixer = BatchMixer(mixup_alpha=0.4, num_classes=3, seed=0)
        >>> x, y = torch.arange(4.0).reshape(4, 1), torch.tensor([0, 1, 2, 0])
        >>> x_mixed, y_soft = mixer(x, y)
        >>> y_soft.shape, torch.allclose(y_soft.sum(1), torch.ones(4)), mixer.state_dict()["num_batches"]
        (torch.Size([4, 3]), True, 1)
        >>> draw = mixer.last_draw
        >>> torch.allclose(x_mixed, draw.lam * x + (1 - draw.lam) * x[draw.permutation])
        True
    """

    mixup_alpha: float = 1.0
    cutmix_alpha: float = 0.0
    prob: float = 1.0
    switch_prob: float = 0.5
    correct_lam: bool = True
    num_classes: int | None = None
    seed: int = 0
    sync_across_ranks: bool = False
    input_key: int | str = 0
    target_key: int | str = 1
    rank: int = field(default=0, init=False, repr=False)  # set by BatchMixingMixin from the global rank
    num_batches: int = field(default=0, init=False, repr=False)
    last_draw: MixDraw | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_non_negative("mixup_alpha", self.mixup_alpha)
        check_non_negative("cutmix_alpha", self.cutmix_alpha)
        if self.mixup_alpha == 0 and self.cutmix_alpha == 0:
            raise ValueError(
                "`mixup_alpha` and `cutmix_alpha` are both 0, got (0, 0): set at least one > 0 "
                "(or leave the BatchMixer out)."
            )
        check_in_range("prob", self.prob, 0.0, 1.0)
        check_in_range("switch_prob", self.switch_prob, 0.0, 1.0)
        check_bool("correct_lam", self.correct_lam)
        check_int("num_classes", self.num_classes, minimum=2, optional=True)
        check_int("seed", self.seed, minimum=0)
        check_bool("sync_across_ranks", self.sync_across_ranks)
        for name, key in (("input_key", self.input_key), ("target_key", self.target_key)):
            if not isinstance(key, (int, str)) or isinstance(key, bool):
                raise TypeError(f"`{name}` must be a tuple index (int) or a mapping key (str), got {key!r}.")
        self.mixup_alpha, self.cutmix_alpha = float(self.mixup_alpha), float(self.cutmix_alpha)
        self.prob, self.switch_prob = float(self.prob), float(self.switch_prob)
        self._generator = torch.Generator(device="cpu")

    def to_dict(self) -> dict[str, Any]:
        """The constructor arguments as plain data (``BatchMixer(**d)`` rebuilds it): what ``hparams.yaml``
        stores when a module's ``save_hyperparameters()`` records a mixer."""
        return {name: getattr(self, name) for name in _SETTINGS}

    def __getstate__(self) -> dict[str, Any]:
        # settings + counter only: pickles for ddp_spawn and loads under torch.load(weights_only=True)
        return {**self.to_dict(), "num_batches": self.num_batches}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**{name: state[name] for name in _SETTINGS if name in state})  # type: ignore[misc]
        self.num_batches = int(state.get("num_batches", 0))

    def draw(self, num_samples: int, height: int = 0, width: int = 0) -> MixDraw:
        """The draws for the next batch (advances the counter). ``height``/``width``: CutMix's image size."""
        index = self.num_batches
        self.num_batches += 1
        generator = self._generator
        generator.manual_seed(mix_seed(self.seed, 0 if self.sync_across_ranks else self.rank, index))
        u_apply, u_switch = torch.rand(2, dtype=torch.float64, generator=generator).tolist()
        applied = u_apply < self.prob
        both = self.mixup_alpha > 0 and self.cutmix_alpha > 0
        use_cutmix = u_switch < self.switch_prob if both else self.cutmix_alpha > 0
        lam = sample_beta(self.cutmix_alpha if use_cutmix else self.mixup_alpha, generator)
        permutation = torch.randperm(num_samples, generator=generator)
        if not applied:
            self.last_draw = MixDraw(index, False, "none", 1.0, torch.arange(num_samples))
            return self.last_draw
        box = None
        if use_cutmix:
            box = cutmix_box(lam, height, width, generator)
            if self.correct_lam:
                y1, y2, x1, x2 = box
                lam = 1.0 - (y2 - y1) * (x2 - x1) / float(height * width)
        self.last_draw = MixDraw(index, True, "cutmix" if use_cutmix else "mixup", lam, permutation, box)
        return self.last_draw

    def __call__(self, inputs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Mix one batch: returns ``(mixed_inputs, soft_targets)``; the inputs are not modified."""
        soft = self._soft_targets(targets)
        needs_image = self.cutmix_alpha > 0
        if needs_image and inputs.dim() < 3:
            raise ValueError(
                f"CutMix needs inputs shaped (N, ..., H, W), got {tuple(inputs.shape)}; set `cutmix_alpha=0`."
            )
        if self.mixup_alpha > 0 and not torch.is_floating_point(inputs):
            raise ValueError(f"Mixup needs floating-point inputs, got {inputs.dtype}; convert them first.")
        height, width = (inputs.shape[-2], inputs.shape[-1]) if needs_image else (0, 0)
        draw = self.draw(inputs.shape[0], height, width)
        if not draw.applied:
            return inputs, soft
        perm = draw.permutation.to(inputs.device, non_blocking=True)
        lam = draw.lam
        if draw.box is None:
            mixed = lam * inputs + (1.0 - lam) * inputs[perm]
        else:
            y1, y2, x1, x2 = draw.box
            mixed = inputs.clone()
            mixed[..., y1:y2, x1:x2] = inputs[perm][..., y1:y2, x1:x2]
        return mixed, lam * soft + (1.0 - lam) * soft[perm]

    def mix_batch(self, batch: Any) -> Any:
        """Mix the inputs and targets found at ``input_key`` / ``target_key`` of a tuple, list or mapping
        batch; returns a new tuple, list or ``dict`` with those two entries replaced."""
        out: Any = dict(batch) if isinstance(batch, Mapping) else list(batch)
        out[self.input_key], out[self.target_key] = self(batch[self.input_key], batch[self.target_key])
        return tuple(out) if isinstance(batch, tuple) else out

    def state_dict(self) -> dict[str, Any]:
        """The batch counter (the whole generator state: see the class docstring) and the settings."""
        return {
            "num_batches": self.num_batches,
            "seed": self.seed,
            "sync_across_ranks": self.sync_across_ranks,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Continue the stream of a saved run (settings given at construction win)."""
        self.num_batches = int(state_dict.get("num_batches", 0))

    def _soft_targets(self, targets: Tensor) -> Tensor:
        if torch.is_floating_point(targets):
            if targets.dim() != 2:
                raise ValueError(f"soft targets must be (N, C), got {tuple(targets.shape)}.")
            return targets.float()
        if self.num_classes is None:
            raise ValueError(
                "targets are class indices, so the BatchMixer needs `num_classes`, got None; pass "
                "`num_classes=C` (or give one-hot float targets)."
            )
        return F.one_hot(targets.long(), self.num_classes).float()


_SETTINGS = tuple(inspect.signature(BatchMixer).parameters)  # the constructor arguments

register_plain_type(BatchMixer)  # a dict in checkpoints, a mapping in hparams.yaml


class BatchMixingMixin:
    """Mixes every training batch with ``self.batch_mixer`` (a :class:`BatchMixer`, ``None``: off) in
    ``on_after_batch_transfer``, from ``on_train_start`` to ``on_train_end`` only: validation, test, the
    sanity check and the preflight see batches unchanged; checkpointed under ``"batch_mixer"``. Put the mixin
    first in the bases; its hooks and why a mixin: ``docs/guides/mixing.md``.

    Example:
        >>> from lightning_recipes.losses import mixed_cross_entropy
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> class Mixed(BatchMixingMixin, TinyClassifier):
        ...     def __init__(self, batch_mixer: BatchMixer | None = None):
        ...         super().__init__(num_classes=4)
        ...         self.batch_mixer = batch_mixer
        ...     def training_step(self, batch, batch_idx):
        ...         x, y = batch  # y: (N, 4) soft targets here, class indices in validation
        ...         return mixed_cross_entropy(self(x), y, label_smoothing=0.1)
        >>> model = Mixed(BatchMixer(mixup_alpha=0.4, num_classes=4))
        >>> fast_trainer(max_steps=3).fit(model, random_classification_loader())
        >>> model.batch_mixer.num_batches
        3
    """

    batch_mixer: BatchMixer | None
    _in_train_loop: bool = False  # from the module's on_train_start to on_train_end

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        batch = super().on_after_batch_transfer(batch, dataloader_idx)  # type: ignore[misc]
        mixer = getattr(self, "batch_mixer", None)
        trainer = _attached_trainer(self)
        if mixer is None or trainer is None or not trainer.training or not self._in_train_loop:
            return batch
        mixer.rank = trainer.global_rank
        return mixer.mix_batch(batch)

    def on_train_end(self) -> None:
        super().on_train_end()  # type: ignore[misc]
        self._in_train_loop = False

    def on_train_start(self) -> None:
        super().on_train_start()  # type: ignore[misc]
        self._in_train_loop = True
        trainer = _attached_trainer(self)
        datamodule = getattr(trainer, "datamodule", None)
        mixing = getattr(self, "batch_mixer", None) is not None
        if mixing and datamodule is not None and is_overridden("on_after_batch_transfer", datamodule):
            raise RuntimeError(
                f"{type(datamodule).__name__} overrides `on_after_batch_transfer`, so Lightning calls it "
                "instead of the module's and the BatchMixingMixin would never mix a batch. Call "
                "`model.batch_mixer.mix_batch(batch)` at the end of the datamodule's hook (training "
                "batches only) and set the module's `batch_mixer` to None."
            )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)  # type: ignore[misc]
        plain_hyperparameters(checkpoint)  # a mixer in hparams goes in as a dict: plain types only
        mixer = getattr(self, "batch_mixer", None)
        if mixer is not None:
            checkpoint[_CHECKPOINT_KEY] = mixer.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)  # type: ignore[misc]
        rebuild_hyperparameters(self, checkpoint)
        mixer = getattr(self, "batch_mixer", None)
        if mixer is not None and _CHECKPOINT_KEY in checkpoint:
            mixer.load_state_dict(checkpoint[_CHECKPOINT_KEY])


def _attached_trainer(module: Any) -> pl.Trainer | None:
    """The Trainer the module is attached to, or ``None`` (a detached copy, e.g. in the preflight)."""
    try:
        return module.trainer
    except RuntimeError:  # LightningModule.trainer raises when no Trainer is attached
        return None
