"""Score the preflight on the development gallery: one row per case, then the summary.

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m galleries.preflight.dev.score \
        [--ids a,b] [--messages] [--json out.json] [--gallery dev|sealed|sealed-c|...|all] \\
        [--checks input_independence,loss] [--details]

``--gallery sealed`` scores the sealed galleries A and B (``galleries/preflight/sealed``) instead, and
``--gallery sealed-c`` sealed gallery C, ``--gallery sealed-d`` sealed gallery D, ``--gallery sealed-e``
sealed gallery E, ``--gallery sealed-f`` sealed gallery F, ``sealed-g`` G, ``sealed-hi`` H (written in two
halves, ``h.py`` and ``i.py``), ``sealed-jk`` J (``j.py`` and ``k.py``), ``sealed-lm`` L (``l.py`` and
``m.py``), ``sealed-no`` N (``n.py`` and ``o.py``), ``sealed-pq`` P (``p.py`` and ``q.py``), ``sealed-rs``
R (``r.py`` and ``s.py``), ``sealed-tu`` T (``t.py`` and ``u.py``), ``sealed-vw`` V (``v.py`` and
``w.py``), ``sealed-xy`` X (``x.py`` and ``y.py``), ``sealed-z`` Z (``z1.py`` and ``z2.py``),
``sealed-zz`` ZZ (``zz1.py`` and ``zz2.py``), ``sealed-zy`` ZY (``zy1.py`` and ``zy2.py``), ``sealed-zx``
ZX (``zx1.py`` and ``zx2.py``), ``sealed-zw`` ZW (``zw1.py`` and ``zw2.py``), ``sealed-zv`` ZV
(``zv1.py`` and ``zv2.py``) and ``sealed-zu`` ZU (``zu1.py`` and ``zu2.py``): each once,
at the end of the work it judges (issue #34).

A bug is caught when some check says ``fail`` or ``warn``; ``inconclusive``, ``skip`` and ``error`` do not
catch it (a miss). A healthy case raises a false alarm when some check says ``fail`` or ``error``; its
``warn`` results are counted apart. ``--twins`` also runs every bug's fixed twin (a healthy model): a bug
counts as caught cleanly when its twin raises no ``fail``/``warn`` from the checks that caught the bug.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from . import SealedCase
from .cases import BUGS, FIXED_TWINS, HEALTHY

CAUGHT = ("fail", "warn")
FALSE_ALARM = ("fail", "error")


@dataclass
class Row:
    """One case's outcome."""

    id: str
    bug: bool
    ok: bool
    statuses: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def flagged(self) -> list[str]:
        """The checks that did not pass, as ``name:status``."""
        return [f"{name}:{status}" for name, status in self.statuses.items() if status != "pass"]

    @property
    def caught(self) -> bool:
        return any(status in CAUGHT for status in self.statuses.values())

    @property
    def false_alarm(self) -> bool:
        return any(status in FALSE_ALARM for status in self.statuses.values())

    @property
    def warned(self) -> bool:
        return any(status == "warn" for status in self.statuses.values())


GALLERIES = (
    "dev",
    "sealed",
    "sealed-c",
    "sealed-d",
    "sealed-e",
    "sealed-f",
    "sealed-g",
    "sealed-hi",
    "sealed-jk",
    "sealed-lm",
    "sealed-no",
    "sealed-pq",
    "sealed-rs",
    "sealed-tu",
    "sealed-vw",
    "sealed-xy",
    "sealed-z",
    "sealed-zz",
    "sealed-zy",
    "sealed-zx",
    "sealed-zw",
    "sealed-zv",
    "sealed-zu",
)

#: The galleries whose halves are not one letter each.
HALVES = {
    "sealed": ("a", "b"),
    "sealed-z": ("z1", "z2"),
    "sealed-zz": ("zz1", "zz2"),
    "sealed-zy": ("zy1", "zy2"),
    "sealed-zx": ("zx1", "zx2"),
    "sealed-zw": ("zw1", "zw2"),
    "sealed-zv": ("zv1", "zv2"),
    "sealed-zu": ("zu1", "zu2"),
}


def gallery_cases(gallery: str, twins: bool = False) -> list[SealedCase]:
    """The bugs then the healthy cases of one gallery (``sealed`` is A and B, ``sealed-hi`` H's two halves);
    ``twins`` adds each bug's healthy twin (dev's fixed twins; a sealed bug's proof twin) as
    ``<id>__fixed``."""
    if gallery == "dev":
        return BUGS + HEALTHY + (FIXED_TWINS if twins else [])
    import importlib

    letters = HALVES.get(gallery) or tuple(gallery.removeprefix("sealed-"))
    modules = [importlib.import_module(f"galleries.preflight.sealed.{letter}") for letter in letters]
    cases = [case for m in modules for case in m.BUGS] + [case for m in modules for case in m.HEALTHY]
    if twins:  # the twin each proof trains the bug against (the gallery's proof module, imported here only)
        for letter in letters:
            proofs = importlib.import_module(f"galleries.preflight.sealed.test_proofs_{letter}").PROOFS
            bugs = {case.id: case for case in cases}
            cases += [
                SealedCase(f"{name}__fixed", bugs[name].task, *proof.twin)
                for name, proof in proofs.items()
                if isinstance(getattr(proof, "twin", None), tuple)  # (model, data) builders: C onwards
            ]
    return cases


def score_case(case: SealedCase, checks: list[str] | None = None, details: bool = False) -> Row:
    """Run the preflight (``checks``: these names only) on ``case``, seeded with ``torch.manual_seed(0)``."""
    from lightning_recipes.checks import preflight

    torch.manual_seed(0)
    model = case.model()
    data = case.data()
    start = time.perf_counter()
    report = preflight(model, **data, checks=checks, num_threads=1, progress=False)
    seconds = time.perf_counter() - start
    return Row(
        id=case.id,
        bug=case.bug is not None,
        ok=report.ok,
        statuses={r.name: r.status for r in report},
        summaries={r.name: r.message.splitlines()[0][:160] for r in report if r.status != "pass"},
        seconds=seconds,
        details={r.name: _jsonable(r.details) for r in report} if details else {},
    )


def _jsonable(value: Any) -> Any:
    """``value`` with tensors and other objects json cannot write turned into numbers or strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.tolist() if value.numel() <= 64 else f"tensor{list(value.shape)}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


def summary(rows: list[Row]) -> str:
    """Bugs caught, healthy false alarms and healthy warnings, as three lines."""
    bugs = [r for r in rows if r.bug]
    healthy = [r for r in rows if not r.bug and not r.id.endswith("__fixed")]
    caught = [r.id for r in bugs if r.caught]
    alarms = [r.id for r in healthy if r.false_alarm]
    warned = [r.id for r in healthy if r.warned]
    missed = [r.id for r in bugs if not r.caught]
    return "\n".join(
        [
            f"bugs caught: {len(caught)}/{len(bugs)}" + (f" (missed: {', '.join(missed)})" if missed else ""),
            f"healthy false alarms: {len(alarms)}/{len(healthy)}"
            + (f" ({', '.join(alarms)})" if alarms else ""),
            f"healthy warnings: {len(warned)}/{len(healthy)}" + (f" ({', '.join(warned)})" if warned else ""),
        ]
    )


def twin_summary(rows: list[Row]) -> str:
    """Bugs caught by a check that stays quiet (no ``fail``/``warn``) on the bug's fixed twin."""
    by_id = {row.id: row for row in rows}
    clean, spurious = [], []
    for row in rows:
        twin = by_id.get(f"{row.id}__fixed")
        if not row.bug or twin is None or not row.caught:
            continue
        catchers = {name for name, status in row.statuses.items() if status in CAUGHT}
        quiet = [name for name in catchers if twin.statuses.get(name) not in CAUGHT]
        (clean if quiet else spurious).append(row.id)
    total = sum(1 for row in rows if row.bug and f"{row.id}__fixed" in by_id)
    twins = [row for row in rows if row.id.endswith("__fixed")]
    alarms = [row.id for row in twins if row.false_alarm]
    warned = [row.id for row in twins if row.warned]
    lines = [
        f"fixed twins false alarms: {len(alarms)}/{len(twins)}"
        + (f" ({', '.join(alarms)})" if alarms else ""),
        f"fixed twins warnings: {len(warned)}/{len(twins)}" + (f" ({', '.join(warned)})" if warned else ""),
        f"bugs caught cleanly (a catching check quiet on the fixed twin): {len(clean)}/{total}"
        + (f" (caught only by checks that also flag the twin: {', '.join(spurious)})" if spurious else ""),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", default="", help="comma-separated case ids (default: every case)")
    parser.add_argument("--json", default="", help="also write the rows (with each non-pass message) here")
    parser.add_argument("--twins", action="store_true", help="also run every bug's fixed twin")
    parser.add_argument(
        "--gallery",
        choices=(*GALLERIES, "all"),
        default="dev",
        help="which gallery to score (all: every one, in turn)",
    )
    parser.add_argument("--checks", default="", help="comma-separated check names (default: every check)")
    parser.add_argument("--details", action="store_true", help="keep each result's evidence fields in --json")
    parser.add_argument("--messages", action="store_true", help="print each non-pass result's first line")
    args = parser.parse_args(argv)
    wanted = {name for name in args.ids.split(",") if name}
    pool: list[SealedCase] = []
    for gallery in GALLERIES if args.gallery == "all" else (args.gallery,):
        pool += gallery_cases(gallery, twins=args.twins)
    cases = [case for case in pool if not wanted or case.id.removesuffix("__fixed") in wanted]
    if unknown := wanted - {case.id.removesuffix("__fixed") for case in cases}:
        parser.error(f"unknown --ids: {sorted(unknown)}")
    rows: list[Row] = []
    for case in cases:
        row = score_case(case, [name for name in args.checks.split(",") if name] or None, args.details)
        rows.append(row)
        kind = "bug" if row.bug else "healthy"
        verdict = (
            ("CAUGHT" if row.caught else "MISS") if row.bug else ("ALARM" if row.false_alarm else "clean")
        )
        flagged = " ".join(row.flagged) or "-"
        print(
            f"{row.id:44s} {kind:8s} ok={row.ok!s:5s} {verdict:6s} {row.seconds:6.1f}s  {flagged}", flush=True
        )
        if args.messages:
            for name, text in row.summaries.items():
                print(f"    {name}: {text}")
    print(summary(rows))
    if args.twins:
        print(twin_summary(rows))
    if args.json:
        payload: list[dict[str, Any]] = [
            {**vars(row), "caught": row.caught, "false_alarm": row.false_alarm} for row in rows
        ]
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=1)
    return rows


if __name__ == "__main__":
    main()
