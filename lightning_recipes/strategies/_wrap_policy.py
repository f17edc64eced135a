"""The FSDP1 auto-wrap policy that finds the model's repeated blocks at set-up (the detection itself lives
in :mod:`lightning_recipes._blocks`)."""

from __future__ import annotations

from torch import nn

from lightning_recipes._blocks import infer_block_classes

__all__ = ["LazyBlockPolicy"]


class LazyBlockPolicy:
    """An FSDP1 ``auto_wrap_policy`` (callable protocol) that infers the block classes from the root it is
    given.

    FSDP calls the policy on the root module first, so the inference happens inside the Strategy's own set-up,
    after ``configure_model`` has built the layers (#17157). The same instance then serves as the activation
    checkpointing policy, so both wrap exactly the same blocks. Pickles (``ddp_spawn``).

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> policy, model = LazyBlockPolicy(), TinyTransformerLM()
        >>> top = policy(model, recurse=True, nonwrapped_numel=0)
        >>> top, policy(model.blocks[0], recurse=False, nonwrapped_numel=0)
        (True, True)
        >>> policy.block_classes
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
    """

    def __init__(self, block_classes: tuple[type[nn.Module], ...] | None = None) -> None:
        self.block_classes = block_classes

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
        if self.block_classes is None:
            self.block_classes = infer_block_classes(_unwrap(module))
        if recurse:
            return True
        return isinstance(module, self.block_classes)

    def __repr__(self) -> str:
        names = (
            "inferred at setup" if self.block_classes is None else [c.__name__ for c in self.block_classes]
        )
        return f"{type(self).__name__}({names})"


def _unwrap(module: nn.Module) -> nn.Module:
    # FSDP1 hands the policy the root it wraps; activation checkpointing may hand it an FSDP wrapper.
    inner = getattr(module, "_fsdp_wrapped_module", None)
    return inner if isinstance(inner, nn.Module) else module
