"""Writes ``<check>_results.json``, read by ``test_results_match_those_saved_before_the_split`` in
``tests/checks/test_data_check.py`` and ``test_target_leakage_check.py``: the check's status, message and
details on each ``GOLDEN_CASES`` there. Rewrite only for a deliberate change of the check's output.

Run from the repository root: ``PYTHONPATH=. python tests/checks/data/make_golden_results.py``.
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The JSON file each test module's golden results go to.
GOLDEN = {"data_check": "checks.test_data_check", "target_leakage": "checks.test_target_leakage_check"}


def main() -> None:
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(HERE.parents[1]))  # tests/: the test package is `checks`, as under pytest
    for name, test_module in GOLDEN.items():
        module = importlib.import_module(test_module)
        results = {case: module.golden_result(case) for case in module.GOLDEN_CASES}
        (HERE / f"{name}_results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
