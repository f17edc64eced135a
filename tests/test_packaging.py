"""The published package tells the truth (issue #26): the dependency floors are the ones CI tests or that
the tested stack already requires, every third-party import is declared, and the built sdist and wheel carry
the licence, an SPDX licence expression and no development-only metadata."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# The floors, as docs/guides/versioning.md's table states them: what CI runs (Python, torch, Lightning), what
# LightningCLI of Lightning 2.6.0 needs (jsonargparse), and for the libraries we import directly, the floor
# our tested stack (torch 2.13, Lightning 2.6.0, torchmetrics) already requires.
FLOORS = {"torch": ">=2.13", "lightning": ">=2.6", "torchmetrics": ">=1.0", "jsonargparse": ">=4.39"}
FLOORS.update({"numpy": ">1.20.0", "pyyaml": ">5.4", "typing-extensions": ">=4.10.0"})
REPO_ONLY_GROUPS = {"dev", "notebooks", "bench"}  # the repository's tools: dependency groups, never extras


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _specifier(requirement: str) -> str:
    return re.sub(r"\[.*?\]", "", requirement.split(";")[0]).strip()[len(_name(requirement)) :].strip()


def _declared() -> dict[str, str]:
    """Every distribution the published metadata names (dependencies and extras) -> where."""
    found = {_name(r): "dependencies" for r in PROJECT["dependencies"]}
    for extra, requirements in PROJECT["optional-dependencies"].items():
        found.update({_name(r): f"extra {extra}" for r in requirements if _name(r) not in found})
    return found


@functools.cache
def _package_imports() -> dict[str, set[str]]:
    """Top-level third-party module -> the package files importing it (nested imports included)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "lightning_recipes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "lightning_recipes":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_lightning_floor_in_pyproject_is_the_version_ci_tests():
    floor = re.search(r'^\s*"lightning>=([\d.]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert floor, "pyproject.toml declares no `lightning>=` floor"
    declared = floor.group(0).strip()
    tested = re.search(r"^LIGHTNING_FLOOR := ([\d.]+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert tested, "Makefile has no LIGHTNING_FLOOR"
    assert tested.group(1).split(".")[:2] == floor.group(1).split(".")[:2], (declared, tested.group(1))
    assert "make test-floor" in (ROOT / ".ci" / "run").read_text()


def test_every_third_party_import_of_the_package_is_declared():
    providers = packages_distributions()
    declared = _declared()
    missing = {}
    for module, files in _package_imports().items():
        distributions = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
        if not distributions & set(declared):
            missing[module] = (sorted(distributions), sorted(files)[:3])
    assert not missing, f"imported by lightning_recipes but declared nowhere in [project]: {missing}"


def test_torchmetrics_is_declared_because_the_package_uses_it():
    assert "lightning_recipes/demos/model.py" in _package_imports().get("torchmetrics", set())


def test_the_floors_are_the_documented_ones():
    declared = {_name(r): _specifier(r) for r in PROJECT["dependencies"]}
    assert declared == FLOORS
    assert PROJECT["requires-python"] == ">=3.11"
    guide = (ROOT / "docs" / "guides" / "versioning.md").read_text()
    for name, floor in FLOORS.items():
        row = re.search(rf"^\| `{name}(\[\w+\])?` \| ([^|]+) \|", guide, re.MULTILINE | re.IGNORECASE)
        assert row, f"docs/guides/versioning.md has no row for `{name}`"
        assert row.group(2).replace(" ", "") in (floor.lstrip(">="), floor), (name, row.group(2), floor)
    for requirements in PROJECT["optional-dependencies"].values():
        assert all(re.search(r">=?\s*\d", r) for r in requirements), requirements


def test_metadata_fields_are_consistent_with_the_tested_python():
    classifiers = PROJECT["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # forbidden beside an SPDX expression
    assert not [c for c in classifiers if re.search(r"Python :: 3\.(\d+)$", c) and c[-4:] < "3.11"]
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py311"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == "3.11"
    assert not REPO_ONLY_GROUPS & set(PROJECT["optional-dependencies"])
    assert set(PYPROJECT["dependency-groups"]) >= REPO_ONLY_GROUPS


def test_every_classifier_is_one_the_index_accepts():
    from trove_classifiers import classifiers as known  # the list PyPI validates uploads against

    assert not [c for c in PROJECT["classifiers"] if c not in known]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built by setuptools' PEP 517 backend from a copy of what a clean clone holds
    (git's tracked and not-ignored files: the repository stays clean; a few seconds)."""
    source = tmp_path_factory.mktemp("source")
    git_files = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(git_files, cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # (a deleted, not yet committed file is still listed)
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    # (the output folder is read once: the backend rewrites sys.argv while it builds)
    build = "import sys; from setuptools import build_meta as b; out = sys.argv[1]; b.build_sdist(out); "
    build += "b.build_wheel(out)"
    command = [sys.executable, "-c", build, str(out)]
    result = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    built = list(out.iterdir())
    assert sorted(p.suffix for p in built) == [".gz", ".whl"], (built, result.stderr[-3000:])
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return {"sdist": sdist, "wheel": wheel}


def _metadata(text: str):
    return Parser().parsestr(text)


def test_the_wheel_carries_the_licence_and_honest_metadata(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = _metadata(wheel.read(metadata_name).decode())
        licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licence and b"Apache License" in wheel.read(licence[0])
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert not [c for c in metadata.get_all("Classifier") if c.startswith("License ::")]
    assert set(metadata.get_all("Provides-Extra")) == set(PROJECT["optional-dependencies"])
    assert not REPO_ONLY_GROUPS & set(metadata.get_all("Provides-Extra"))
    requires = metadata.get_all("Requires-Dist")
    assert not [r for r in requires if not re.search(r"(>=|>)\s*\d", r)], requires  # every one has a floor
    assert metadata["Requires-Python"] == ">=3.11"
    urls = {url.split(",")[0] for url in metadata.get_all("Project-URL")}
    assert urls == {"Homepage", "Documentation", "Changelog", "Issues"}
    # what the package needs at run time beside its .py files
    assert {"lightning_recipes/py.typed", "lightning_recipes/optim/_cpu_kernels.c"} <= set(names)


def test_the_sdist_is_the_package_source_and_its_licence_and_no_part_of_the_test_suite(
    built: dict[str, Path],
) -> None:
    """The sdist ships no part of the suite (setuptools' default would ship the top-level tests/test*.py)."""
    top = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "setup.cfg", "MANIFEST.in"}
    with tarfile.open(built["sdist"]) as sdist:
        files = {m.name.split("/", 1)[1]: m for m in sdist.getmembers() if m.isfile()}
        metadata = _metadata(sdist.extractfile(files["PKG-INFO"]).read().decode())  # type: ignore[union-attr]
        assert b"Apache License" in sdist.extractfile(files["LICENSE"]).read()  # type: ignore[union-attr]
    assert metadata["License-Expression"] == "Apache-2.0"
    names = list(files)
    inside = ("lightning_recipes/", "lightning_recipes.egg-info/")
    outside = [n for n in names if n not in top and not n.startswith(inside)]
    assert not outside, outside
    python = [n for n in names if n.endswith(".py")]
    packaged = [str(p.relative_to(ROOT)) for p in (ROOT / "lightning_recipes").rglob("*.py")]
    assert sorted(python) == sorted(packaged) and "lightning_recipes/optim/_cpu_kernels.c" in names


def test_the_package_version_is_pyprojects():
    """``__version__`` (the package, read by ``--version`` before imports) equals ``pyproject.toml``'s."""
    source = (ROOT / "lightning_recipes" / "__init__.py").read_text()
    written = re.search(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    assert written, "lightning_recipes/__init__.py sets no __version__"
    assert written.group(1) == PROJECT["version"]


def test_the_changelogs_top_section_is_the_version():
    """The changelog's top section is ``[<version>] - <date>`` and links its tag (guides/versioning.md)."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](.*)$", changelog, re.MULTILINE)
    assert sections and sections[0][0] == PROJECT["version"], sections[:2]
    assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", sections[0][1]), sections[0]
    version = re.escape(PROJECT["version"])
    assert re.search(rf"^\[{version}\]: .*v{version}$", changelog, re.M)
