"""Pins the CPU kernels that torch, MKL and oneDNN dispatch to, for every test, doctest and gallery run.

The suite compares numbers: a detector's verdict at its threshold, one run's loss below another's. Which SIMD
kernels run (AVX-512 or AVX2) changes the rounding of every sum, and over a few hundred training steps that
can carry a run across a threshold: one commit passed on an AVX-512 machine and failed 4 tests on an AVX2-only
one. Every x86-64 machine CI may draw has AVX2, so the suite runs AVX2 kernels everywhere. Pytest loads this
file before any test module, and torch reads the variable at its first operation, not at import
(tests/test_numerics_pinned.py checks both). Set a variable yourself to run the suite on other kernels, or
``LR_KERNELS=native`` to run the machine's own (how the gallery proofs were stamped: galleries/proofs.py).
"""

from __future__ import annotations

import os
import platform

PINNED_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}

if platform.machine().lower() in {"x86_64", "amd64"} and os.environ.get("LR_KERNELS") != "native":
    for name, value in PINNED_KERNELS.items():
        os.environ.setdefault(name, value)
