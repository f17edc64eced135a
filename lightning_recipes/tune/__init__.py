"""Tuning before the long run: the LR range test (:func:`find_lr`, :class:`LRRangeTest`) and the speed options
measured on the user's model (:func:`speed_tune`).
"""

from lightning_recipes.tune._speed_options import ApplySpeedOptions, apply_speed_options, speed_loader
from lightning_recipes.tune.lr_range import LRRangeResult, find_lr, sweep_lr
from lightning_recipes.tune.lr_range_callback import LRRangeTest
from lightning_recipes.tune.speed import OPTIONS, SpeedOption, SpeedRow, SpeedTuneResult, speed_tune

__all__ = [
    "OPTIONS",
    "ApplySpeedOptions",
    "LRRangeResult",
    "LRRangeTest",
    "SpeedOption",
    "SpeedRow",
    "SpeedTuneResult",
    "apply_speed_options",
    "find_lr",
    "speed_loader",
    "speed_tune",
    "sweep_lr",
]
