"""The evaluation galleries: training runs with real, silent bugs and healthy look-alikes that the preflight
(``galleries.preflight``) and ``HealthMonitor`` (``galleries.health``) are scored on. They are data, not
tests: ``tests/`` checks the library's behaviour on them, each set's scorer (``python -m
galleries.<set>.score``) and ``benchmarks/`` measure it, and the proofs here (``test_*.py``, the
``gallery_proof`` marker) show with plain torch and Lightning that each case is what it claims. The proofs
run when a gallery changes (``make gallery-proofs``, ``galleries/proofs.py``), not with the test suite.
Nothing here ships in the wheel.
"""
