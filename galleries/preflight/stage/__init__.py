"""The stage gallery of issue #24: planted bugs in every stage of the training loop (loaders and sampler,
splits, forward, loss, optimisation, schedule, validation path) and healthy look-alikes, written blind from
the issue's stage list (without reading the checks' code) and not tuned after running the preflight on them.

Each module defines ``BUGS: list[Case]`` and ``HEALTHY: list[Case]`` (``tests.checks.gallery.Case``). Every
bug has a twin test (``tests/checks/test_stage_gallery_twins_*.py``) that proves it real without the library:
the buggy model trained with a real ``Trainer`` ends measurably worse than its healthy twin.
"""

from tests.checks.gallery import Case

__all__ = ["Case"]
