"""``python -m benchmarks``: run every benchmark module in turn (each has a ``main(argv) -> int``)."""

from __future__ import annotations

import importlib
import sys

MODULES = [
    "optimizers",
    "callback_overhead",
    "stability_overhead",
    "stability_false_alarms",
    "preflight_runtime",
    "preflight_gallery",
    "health_overhead",
    "health_field_gallery",
    "speed_tune",
    "activation_checkpointing",
    "lr_finder",
]


def main() -> int:
    status = 0
    for name in MODULES:
        try:
            module = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError as err:
            print(f"[benchmarks] skipping {name}: {err}")
            continue
        print(f"\n===== benchmarks.{name} =====", flush=True)
        status |= int(module.main([]) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
