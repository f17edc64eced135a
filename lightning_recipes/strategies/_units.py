"""Byte units shared by the memory estimator, the recommender, the CLI and the host-memory checks."""

from __future__ import annotations

__all__ = ["GIB"]

#: Bytes in a GiB.
GIB = 1024**3
