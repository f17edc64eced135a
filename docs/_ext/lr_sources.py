"""Sources that live outside ``docs/``, brought in at build time so that nothing is copied into git.

* ``notebooks/*.ipynb`` and ``notebooks/README.md`` are copied into ``docs/notebooks/`` (gitignored) when
  the configuration is read; the README becomes the tutorials page, with a toctree of the notebooks
  appended. They are rendered as stored, not executed (the test suite executes them).
* ``benchmarks/README.md`` and ``RESULTS.md`` are copied to ``docs/benchmarks/`` (``readme.md``,
  ``results.md``), ``CHANGELOG.md`` to ``docs/changelog.md``.
* Links to those repository files, in the README sections and in the pages written in ``docs/``
  (``[changelog](../../CHANGELOG.md)``), are rewritten to their pages.
* ``{readme-section} <heading>`` in a docs page is replaced, before parsing, by the body of the README section
  with that ``## `` heading (up to the next ``## `` heading); a heading that is not in the README is a warning
  (an error under ``-W``).
"""

from __future__ import annotations

import os
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
# repository file (relative to the root) -> the docs page that shows it (relative to docs/)
_REPO_PAGES = {
    "CHANGELOG.md": "changelog.md",
    "benchmarks/RESULTS.md": "benchmarks/results.md",
    "benchmarks/README.md": "benchmarks/readme.md",
    "notebooks": "notebooks/index.md",
    "notebooks/README.md": "notebooks/index.md",
    "README.md": "index.md",
}
_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


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
    changelog = root / "CHANGELOG.md"
    missing = "# Changelog\n\nThis checkout has no CHANGELOG.md.\n"
    text = _relink(changelog.read_text(), "changelog", root, root) if changelog.exists() else missing
    if not (src / "changelog.md").exists() or (src / "changelog.md").read_text() != text:
        (src / "changelog.md").write_text(text)


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


def _relink(text: str, docname: str, base: Path, root: Path) -> str:
    """Markdown links written relative to ``base`` (the README: the repository root; a docs page: its own
    folder) that point at a repository file shown on a docs page, rewritten to that page, relative to the
    page ``docname``. Other links are left for MyST to resolve (and to fail on, when they are dead)."""
    page_dir = (root / "docs" / docname).parent

    def replace(match: re.Match[str]) -> str:
        target = match["target"]
        if "://" in target or target.startswith("mailto:"):
            return match[0]
        repo_path = (base / target).resolve()
        try:
            relative = repo_path.relative_to(root).as_posix()
        except ValueError:
            return match[0]
        if relative.startswith("docs/"):  # a page of the site, linked from a file outside docs/
            new = os.path.relpath(repo_path, page_dir)
        elif relative in _REPO_PAGES:
            new = os.path.relpath(root / "docs" / _REPO_PAGES[relative], page_dir)
        else:
            return match[0]
        return f"]({Path(new).as_posix()}{match['anchor'] or ''})"

    return _LINK.sub(replace, text)


def substitute_readme_sections(app: Sphinx, docname: str, source: list[str]) -> None:
    root = _repo_root(app)
    if not docname.startswith(("notebooks/", "benchmarks/", "api/")):  # pages written in docs/
        source[0] = _relink(source[0], docname, (root / "docs" / docname).parent, root)
    if "{readme-section}" not in source[0]:
        return
    readme_path = root / "README.md"
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
        return _relink(body, docname, root, root)

    source[0] = _DIRECTIVE.sub(replace, source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", copy_sources)  # before the source files are listed
    app.connect("source-read", substitute_readme_sections)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
