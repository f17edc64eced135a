"""Destroy the default process group when a test's worker process exits.

A ``ddp_spawn`` worker leaves through the interpreter's normal shutdown with gloo's process group still alive.
Now and then (about 1 run in 12 of our spawn tests) torch/gloo's teardown then calls ``std::terminate``
("terminate called without an active exception"), the worker dies with SIGABRT *after* ``fit`` finished, and
Lightning reports the run as failed. Destroying the group first, in an ``atexit`` handler, takes that path
away. Fork workers leave with ``os._exit`` and never reach it. Registered on import of
:mod:`lightning_recipes.testing`, which every worker of our tests imports when it unpickles their objects.
"""

from __future__ import annotations

import atexit

import torch.distributed as dist

__all__: list[str] = []


def _destroy_default_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


atexit.register(_destroy_default_process_group)
