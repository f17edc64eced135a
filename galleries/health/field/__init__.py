"""HealthMonitor's field gallery (issue #25): runs that differ from
``tests.helpers.health_gallery`` in architecture, optimizer, schedule and onset, written blind
from the issue's list (without reading the rules' code) and not tuned after running the monitor on them.

Each module defines ``CASES: list[FieldCase]``. Every case is proven real by :class:`PlainRecorder`, a plain
Lightning callback with no library code (``tests/callbacks/test_health_field_gallery.py``: the proof runs on
the recording of a run without the monitor), and then diagnosed by a ``HealthMonitor`` alone (no other
callback).
"""

from tests.callbacks.health_field_gallery._case import FieldCase, PlainRecorder, run_case

__all__ = ["FieldCase", "PlainRecorder", "run_case"]
