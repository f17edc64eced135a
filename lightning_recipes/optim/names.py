"""The one table of optimizer and schedule names (one :class:`OptimizerSpec` per optimizer: its class, the
recipe's defaults, its state per parameter), read by the recipe, the builder and the memory estimator.

Example:
    >>> OPTIMIZERS["lion"].state_tensors, OPTIMIZERS["lion"].defaults["lr"], RECIPE_OPTIMIZERS
    (1, 0.0001, ('adamw', 'lion', 'lamb'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._validation import check_choice

__all__ = [
    "IMPLEMENTATIONS",
    "OPTIMIZERS",
    "RECIPE_OPTIMIZERS",
    "SCHEDULES",
    "OptimizerName",
    "OptimizerSpec",
    "ScheduleName",
    "check_implementation",
]

Implementation = Literal["auto", "for_loop", "foreach", "native", "compiled"]
IMPLEMENTATIONS: tuple[str, ...] = ("auto", "for_loop", "foreach", "native")


def check_implementation(implementation: Any) -> None:
    """Raise for an unknown implementation; warn for the removed ``"compiled"`` (it runs as ``"auto"``)."""
    if implementation == "compiled":
        warn_deprecated(
            "implementation='compiled' is deprecated and runs as 'auto' (the torch.compile path was never "
            "the fastest: benchmarks/RESULTS.md); pass 'auto', 'native', 'foreach' or 'for_loop'.",
            stacklevel=4,
        )
        return
    check_choice("implementation", implementation, IMPLEMENTATIONS)


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer as every part of the package sees it: the ``name`` users write, the ``class_name`` the
    builder returns, the ``state_tensors`` (parameter-shaped) and ``step_bytes`` (scalar state) it keeps per
    tensor, and the recipe's ``defaults`` (empty for optimizers only the memory estimator knows).
    """

    name: str
    class_name: str
    state_tensors: int
    step_bytes: int
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def in_recipe(self) -> bool:
        """Whether :class:`~lightning_recipes.OptimizerRecipe` and ``build_optimizer`` accept this name."""
        return bool(self.defaults)


def _spec(name: str, class_name: str, states: int, step_bytes: int, **defaults: Any) -> OptimizerSpec:
    return OptimizerSpec(name, class_name, states, step_bytes, MappingProxyType(defaults))


# Lion's lr is 10x lower and its weight decay 10x higher than AdamW's, keeping the effective decay
# lr * weight_decay equal (Chen et al. 2023, section 5: "3-10x smaller learning rate ... larger decoupled
# weight decay"). Lamb's are You et al.'s / NVIDIA's BERT values. Lion has no eps.
OPTIMIZERS: Mapping[str, OptimizerSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("adamw", "AdamW", 2, 4, lr=1e-3, weight_decay=0.05, betas=(0.9, 0.999), eps=1e-8),
            _spec("lion", "Lion", 1, 0, lr=1e-4, weight_decay=0.5, betas=(0.9, 0.99), eps=None),
            _spec("lamb", "Lamb", 2, 4, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-6),
            # known to the memory estimator only: torch.optim's common optimizers, as their `state` holds
            # them after a step (a test steps each one and counts)
            _spec("adam", "Adam", 2, 4),
            _spec("sgd_momentum", "SGD", 1, 0),
            _spec("sgd", "SGD", 0, 0),
            _spec("rmsprop", "RMSprop", 1, 4),
            _spec("rmsprop_momentum", "RMSprop", 2, 4),  # momentum > 0 or centered=True: a second tensor
            _spec("adagrad", "Adagrad", 1, 4),
            _spec("adadelta", "Adadelta", 2, 4),
            _spec("adamax", "Adamax", 2, 4),
            _spec("nadam", "NAdam", 2, 8),  # step + mu_product
            _spec("radam", "RAdam", 2, 4),
            _spec("asgd", "ASGD", 1, 12),  # step, eta, mu
        )
    }
)

#: The names the recipe and ``build_optimizer`` accept, in display order.
RECIPE_OPTIMIZERS: tuple[str, ...] = tuple(name for name, spec in OPTIMIZERS.items() if spec.in_recipe)
#: The names ``OptimizerRecipe(schedule=...)`` and ``build_scheduler`` accept.
SCHEDULES: tuple[str, ...] = ("cosine", "linear", "constant", "wsd", "none")

# Literal spellings of the two tuples above, for type checkers and LightningCLI (a test keeps them equal).
OptimizerName = Literal["adamw", "lion", "lamb"]
ScheduleName = Literal["cosine", "linear", "constant", "wsd", "none"]
