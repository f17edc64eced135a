"""Score HealthMonitor on sealed zoo 3 (new tasks, blind pairs, healthy look-alikes) with the first zoo's
scorer.

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m tests.callbacks.health_sealed_zoo3.score [--names a]
"""

from __future__ import annotations

from tests.callbacks.health_sealed_zoo.score import main
from tests.callbacks.health_sealed_zoo3.zoo import CASES

if __name__ == "__main__":
    main(cases=CASES)
