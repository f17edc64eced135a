"""Score HealthMonitor on sealed zoo 26 (stereo scanlines, source separation, bracket words, tomography and
light curves; blind pairs, healthy look-alikes) with the first zoo's scorer.

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m galleries.health.zoo26.score [--names a]
"""

from __future__ import annotations

from galleries.health.zoo1.score import main
from galleries.health.zoo26.zoo import CASES

if __name__ == "__main__":
    main(cases=CASES)
