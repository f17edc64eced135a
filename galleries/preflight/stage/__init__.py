"""The stage gallery of issue #24: planted bugs in every stage of the training loop (loaders and sampler,
splits, forward, loss, optimisation, schedule, validation path) and healthy look-alikes, written blind from
the issue's stage list (without reading the checks' code) and not tuned after running the preflight on them.
Its blind score is session 8's in ``benchmarks/RESULTS.md``; scored after every preflight change since
(``benchmarks/preflight_stage_gallery.py``), it is no longer blind.

Each module defines ``BUGS: list[Case]`` and ``HEALTHY: list[Case]`` (``galleries.preflight.families.Case``).
Every bug has a twin test (``test_twins_*.py`` here) that proves it real without the library: the buggy model
trained with a real ``Trainer`` ends measurably worse than its healthy twin.
"""

from galleries.preflight.families import Case

__all__ = ["Case"]
