"""Callbacks that drop into an existing ``Trainer(callbacks=[...])``.

Naming: ``*Monitor`` only observes and logs; ``*Check`` asserts an invariant a bounded number of times;
``*Stopping`` / ``*Guard`` / ``*Clip`` may change the run's course.
"""

from lightning_recipes.callbacks.run_manifest import RunManifest
from lightning_recipes.callbacks.stability_guard import StabilityGuard

__all__: list[str] = ["RunManifest", "StabilityGuard"]
