"""HealthMonitor's field gallery (issue #25): runs that differ from
``tests.helpers.health_gallery`` in architecture, optimizer, schedule and onset, written blind by two
engineers from the issue's list (without reading the rules' code) and not tuned after running the monitor on
them; used since by the monitor's work (and ``tests/callbacks/health_repair_runs.py``), so no longer blind.

Each module defines ``CASES: list[FieldCase]``. Every case is proven real by :class:`PlainRecorder`, a plain
Lightning callback with no library code (``test_proofs.py`` and ``test_transformer_proofs.py`` here: the proof
runs on the recording of a run without the monitor), and then diagnosed by a ``HealthMonitor`` alone
(``tests/callbacks/test_health_field_gallery.py``, no other callback).
"""

from galleries.health.field._case import FieldCase, PlainRecorder, run_case

__all__ = ["FieldCase", "PlainRecorder", "run_case"]
