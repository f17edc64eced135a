"""Score HealthMonitor on sealed zoo 22 (optical flow, mini-sudoku, rainfall hurdle model, captcha reading
and Black-Scholes surrogate runs, blind pairs, healthy look-alikes) with the first zoo's scorer.

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m galleries.health.zoo22.score [--names a]
"""

from __future__ import annotations

from galleries.health.zoo1.score import main
from galleries.health.zoo22.zoo import CASES

if __name__ == "__main__":
    main(cases=CASES)
