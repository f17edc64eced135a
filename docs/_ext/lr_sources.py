"""Sources that live outside ``docs/``, brought in at build time so that nothing is copied into git.

* ``notebooks/*.ipynb`` and ``notebooks/README.md`` are copied into ``docs/notebooks/`` (gitignored) when
  the configuration is read; the README becomes the tutorials page, with a toctree of the notebooks
  appended. They are rendered as stored, not executed (the test suite executes them).
* ``benchmarks/README.md`` and ``RESULTS.md`` are copied to ``docs/benchmarks/`` (``readme.md``,
  ``results.md``) so the README's links to them resolve.
* ``{readme-section} <heading>`` in a docs page is replaced, before parsing, by the body of the README section
  with that ``## `` heading (up to the next ``## `` heading); a heading that is not in the README is a warning
  (an error under ``-W``). The README's links to repository files are rewritten to their pages here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

NOTEBOOKS_DIR = "notebooks"  # relative to the docs source directory; generated, gitignored
BENCHMARKS_DIR = "benchmarks"
_DIRECTIVE = re.compile(r"^```\{readme-section\}[ \t]+(?P<heading>.+?)[ \t]*\n```[ \t]*$", re.MULTILINE)
_README_LINKS = {"benchmarks/RESULTS.md": "benchmarks/results.md", "notebooks/": "notebooks/index.md"}


def _repo_root(app: Sphinx) -> Path:
    return Path(app.srcdir).parent


def _sync_dir(target: Path, files: dict[str, str]) -> None:
    """Make ``target`` hold exactly ``files`` (name -> text); untouched files keep their mtime."""
    target.mkdir(exist_ok=True)
    for stale in target.iterdir():
        if stale.name not in files:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    for name, text in files.items():
        path = target / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def copy_sources(app: Sphinx, config: Any) -> None:
    root, src = _repo_root(app), Path(app.srcdir)
    notebooks = {p.name: p.read_text() for p in sorted((root / "notebooks").glob("*.ipynb"))}
    readme = (root / "notebooks" / "README.md").read_text()
    readme += "\n\n```{toctree}\n:hidden:\n:glob:\n\n*\n```\n"
    _sync_dir(src / NOTEBOOKS_DIR, {**notebooks, "index.md": readme})
    bench = root / "benchmarks"
    benchmarks = {
        "readme.md": (bench / "README.md").read_text().replace("](RESULTS.md)", "](results.md)"),
        "results.md": (bench / "RESULTS.md").read_text().replace("](README.md)", "](readme.md)"),
    }
    _sync_dir(src / BENCHMARKS_DIR, benchmarks)


def readme_section(readme: str, heading: str) -> str | None:
    """The body of the ``## heading`` section of ``readme`` (without the heading line), or None."""
    lines = readme.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"## {heading}"]
    if len(starts) != 1:
        return None
    body = []
    in_fence = False
    for line in lines[starts[0] + 1 :]:
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            break
        body.append(line)
    return "\n".join(body).strip("\n")


def _relink(text: str, docname: str) -> str:
    """The README's links are relative to the repository root; make them relative to the including page."""
    up = "../" * docname.count("/")
    for old, new in _README_LINKS.items():
        text = text.replace(f"]({old})", f"]({up}{new})")
    return text


def substitute_readme_sections(app: Sphinx, docname: str, source: list[str]) -> None:
    if "{readme-section}" not in source[0]:
        return
    readme_path = _repo_root(app) / "README.md"
    app.env.note_dependency(str(readme_path))
    readme = readme_path.read_text()

    def replace(match: re.Match[str]) -> str:
        heading = match["heading"]
        body = readme_section(readme, heading)
        if body is None:
            logger.warning(
                "README.md has no single section '## %s' (included by {readme-section})",
                heading,
                location=docname,
            )
            return ""
        return _relink(body, docname)

    source[0] = _DIRECTIVE.sub(replace, source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", copy_sources)  # before the source files are listed
    app.connect("source-read", substitute_readme_sections)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
