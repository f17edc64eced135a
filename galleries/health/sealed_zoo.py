"""What HealthMonitor's sealed zoos (``galleries/health/zoo*``) share, once: the short form of
a zoo's case and the zoos' proof tests (plain torch and Lightning: the proofs train without HealthMonitor).

>>> every(50)
{'val_check_interval': 50}
"""

from __future__ import annotations

from typing import Any

from galleries.health.field._case import FieldCase, run_case
from lightning_recipes.callbacks.health_monitor import HealthMonitor

LR_BLOWUP = ("exploding_gradients", "nonfinite_activations")
STUCK = ("not_learning", "loss_plateau")


def case(name: str, build: Any, expected: str | None, proof: Any, description: str, **kw: Any) -> FieldCase:
    """A zoo's run: 300 steps from step 0 unless told otherwise (``kw``: more :class:`FieldCase` fields)."""
    kw.setdefault("max_steps", 300)
    return FieldCase(name=name, build=build, expected=expected, onset_step=kw.pop("onset_step", 0),
                     proof=proof, description=description, **kw)  # fmt: skip


def every(steps: int) -> dict[str, Any]:
    """``trainer_kwargs`` that validate every ``steps`` training steps."""
    return {"val_check_interval": steps}


def check_zoo(
    zoo: Any,
    problems: int,
    healthy: int,
    causes: int = 0,
    repairable: int = 0,
    as_causes: tuple[str, ...] = (),
) -> None:
    """``zoo`` (a ``zoo.py`` module) has at least ``problems`` problem and ``healthy`` healthy runs,
    ``causes`` distinct expected problems and ``repairable`` repairable runs (all of them problem runs); names
    are unique; every problem run names one of ``HealthMonitor.PROBLEMS`` (or of ``as_causes``: names the
    monitor gives only as a finding's cause), an onset and a description."""
    vocabulary = (*HealthMonitor.PROBLEMS, *as_causes)
    assert len(zoo.PROBLEM_CASES) >= problems and len(zoo.HEALTHY_CASES) >= healthy
    assert len({case.expected for case in zoo.PROBLEM_CASES}) >= causes
    assert len({case.name for case in zoo.CASES}) == len(zoo.CASES)
    if repairable:
        names = set(zoo.REPAIRABLE)
        assert len(zoo.REPAIRABLE) >= repairable and names <= {case.name for case in zoo.PROBLEM_CASES}
    for case in zoo.PROBLEM_CASES:
        assert case.expected in vocabulary, case.name
        assert case.expected not in case.also_allowed, case.name
        assert set(case.also_allowed) <= set(vocabulary), case.name
        assert case.onset_step >= 0 and case.description, case.name
    assert all(case.expected is None and case.description for case in zoo.HEALTHY_CASES)


def prove(case: FieldCase) -> None:
    """Train ``case`` once with the plain recorder alone and run its proof on the recording."""
    _, recorder = run_case(case, monitor=False)
    case.proof(recorder)
