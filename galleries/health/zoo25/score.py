"""Score HealthMonitor on sealed zoo 25 (point sets, jets, a road graph, languages, edges and portfolios;
blind pairs, healthy look-alikes) with the first zoo's scorer.

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m galleries.health.zoo25.score [--names a]
"""

from __future__ import annotations

from galleries.health.zoo1.score import main
from galleries.health.zoo25.zoo import CASES

if __name__ == "__main__":
    main(cases=CASES)
