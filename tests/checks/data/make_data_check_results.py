"""Writes ``data_check_results.json``, read by ``test_results_match_those_saved_before_the_split`` in
``tests/checks/test_data_check.py``: ``DataCheck``'s status, message and details on the
cases of ``GOLDEN_CASES`` there. Written once by the code before the check was split into job modules
(issue 23); rewrite it only for a deliberate change of the check's output.

Run from the repository root: ``PYTHONPATH=. python tests/checks/data/make_data_check_results.py``
(``PYTHONPATH`` may point at another checkout of the package: the cases come from this one's tests).
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(HERE.parents[1]))  # tests/: the test package is `checks`, as under pytest
    module = importlib.import_module("checks.test_data_check")
    results = {name: module.golden_result(name) for name in module.GOLDEN_CASES}
    (HERE / "data_check_results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
