"""Which tests the second CI pass (``make test-floor``, the oldest supported Lightning) runs again.

The floor pass exists to catch our code breaking on an older Lightning, so it re-runs every test that
exercises Lightning and skips the ones that cannot see a Lightning version: optimizer and schedule numerics on
plain tensors, static checks of the source tree, packaging metadata, and, by decision (issue #23), the
notebooks and the demos (marked ``end_to_end``), whose parts the unit tests already cover.
Doctests are not collected by the floor pass either (it runs ``pytest tests``).

How the selection stays honest:

- **Opt-out, not opt-in.** A test runs at the floor unless its module is listed in :data:`LIGHTNING_FREE`
  (or it carries ``@pytest.mark.lightning_free`` itself). A new test file is therefore floor-tested until
  someone decides otherwise; forgetting costs CI time, never coverage.
- **The opt-out is checked on every main run.** A ``lightning_free`` test that builds a ``Trainer``, a
  ``Fabric``, a ``LightningCLI``, a ``LightningModule`` or a ``LightningDataModule`` in the test process fails
  (see :func:`lightning_tripwire`). So a listed module that starts using Lightning cannot silently drop out of
  the floor pass: the main pass fails first and names the marker to remove.
- **No stale entries.** A listed path that no longer exists fails collection (a renamed module would
  otherwise run at the floor unnoticed, and a later file at the old path would inherit the opt-out).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository, not the rootdir (pytester runs copy conftest)
MARKER = "lightning_free"
END_TO_END = "end_to_end"

# Paths relative to the repository root: a module, or a directory (everything under it).
LIGHTNING_FREE: dict[str, str] = {
    # optimizer and schedule numerics on plain tensors / nn.Modules
    "tests/optim/test_peer_invariants.py": "optimizer numerics",
    "tests/optim/test_torch_conformance.py": "optimizer numerics",
    "tests/optim/test_hf_schedule_parity.py": "schedule numerics",
    "tests/optim/test_schedules.py": "schedule numerics",
    "tests/optim/test_lamb.py": "optimizer numerics",
    "tests/optim/test_lion.py": "optimizer numerics",
    "tests/optim/test_compiled.py": "optimizer numerics (torch.compile)",
    "tests/optim/test_tied.py": "parameter grouping on nn.Modules",
    # static checks of the tree, metadata
    "tests/test_architecture.py": "static import graph",
    "tests/callbacks/test_health_rules_calibrated.py": "HealthMonitor's rules on host floats",
    "tests/test_packaging.py": "packaging metadata",
}

# Whole-program runs that do use Lightning, skipped at the floor by decision (issue #23): the unit tests cover
# each of their parts at the floor, and these are among the slowest tests. Marked ``end_to_end``, no tripwire.
END_TO_END_PATHS: dict[str, str] = {
    "tests/test_notebooks.py": "the notebooks",
    "tests/demos/test_training.py": "the demo",
    "tests/demos/test_finetuning.py": "the fine-tuning demo",
    "tests/test_readme.py": "the README's examples (documentation examples, as the doctests)",
    # the stage gallery's twin tests train plain Lightning models to prove each planted bug real; they run no
    # lightning_recipes code, so the oldest Lightning adds nothing to what they show
    "tests/checks/test_stage_gallery_twins_data.py": "the stage gallery's twin tests (no package code)",
    "tests/checks/test_stage_gallery_twins_loop.py": "the stage gallery's twin tests (no package code)",
    # the HealthMonitor field gallery's proofs (issue #25): plain recordings, no lightning_recipes code
    "tests/callbacks/test_health_field_gallery_proofs.py": "the field gallery's proofs (no package code)",
    "tests/callbacks/test_health_field_gallery_transformer_proofs.py": "the field gallery's proofs (plain)",
}


def mark_lightning_free(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test under a :data:`LIGHTNING_FREE` path ``lightning_free`` and every one under an
    :data:`END_TO_END_PATHS` path ``end_to_end``."""
    root = ROOT
    for name, paths in ((MARKER, LIGHTNING_FREE), (END_TO_END, END_TO_END_PATHS)):
        stale = [path for path in paths if not (root / path).exists()]
        if stale:
            raise pytest.UsageError(
                f"tests/helpers/floor.py: the {name!r} list names paths that do not exist: {stale}. "
                "Update it to where the tests moved (or remove the entries)."
            )
        prefixes = [root / path for path in paths]
        marker = getattr(pytest.mark, name)
        for item in items:
            where = Path(str(item.path))
            if any(where == path or path in where.parents for path in prefixes):
                item.add_marker(marker)


def _lightning_entry_points() -> list[type]:
    import lightning.fabric as lf
    import lightning.pytorch as pl
    from lightning.pytorch.cli import LightningCLI

    return [pl.Trainer, lf.Fabric, LightningCLI, pl.LightningModule, pl.LightningDataModule]


@contextlib.contextmanager
def lightning_tripwire(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every construction of a Lightning entry point while the block runs (the names, in order).

    Recorded rather than raised: a test may catch exceptions broadly, and the verdict belongs to the fixture.
    """
    built: list[str] = []
    for cls in _lightning_entry_points():
        original = cls.__init__

        @functools.wraps(original)
        def init(
            self: Any, *args: Any, __original: Any = original, __name: str = cls.__name__, **kwargs: Any
        ) -> None:
            built.append(__name)
            __original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", init)
    yield built
