"""docs/guides/fabric.md's example runs as written under Lightning Fabric on CPU."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "fabric.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert len(blocks) == 1, "fabric.md should hold exactly one Python example"
    return blocks[0]


def test_the_fabric_guide_example_trains_with_our_optimizer_and_schedule(capsys: pytest.CaptureFixture):
    namespace: dict[str, Any] = {}
    exec(compile(_example(), str(GUIDE), "exec"), namespace)
    losses, scheduler, optimizer = namespace["losses"], namespace["scheduler"], namespace["optimizer"]
    assert len(losses) == namespace["total_steps"] == 60
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:5]) / 5, losses  # it learned
    # the schedule ran once per optimizer step: warm-up to the peak, cosine down to 0 at the last step
    assert scheduler.last_epoch == 60 and math.isclose(scheduler.get_last_lr()[0], 0.0, abs_tol=1e-12)
    assert optimizer.implementation_used in {"native", "compiled+for_loop", "compiled", "for_loop"}
    out = capsys.readouterr().out
    assert re.search(r"loss \d\.\d\d -> \d\.\d\d; lr now 0\.0e\+00", out), out
    assert f"implementation: {optimizer.implementation_used}" in out
