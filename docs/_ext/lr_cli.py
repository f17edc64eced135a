"""``.. cli-help:: <command>``: the ``--help`` text of ``lightning-recipes <command>``, run at build time.

The text is what ``lightning_recipes.cli.main([<command>, "--help"])`` prints (``.. cli-help::`` with no
argument: the top-level ``lightning-recipes --help``), so the page always shows the help of the code it was
built from. A command that exits non-zero or prints nothing is a warning (an error under ``-W``).
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


def cli_help(command: str | None) -> tuple[int, str]:
    """Run ``lightning-recipes [command] --help`` in process; returns its exit code and stdout + stderr."""
    from lightning_recipes.cli import main

    argv = [command, "--help"] if command else ["--help"]
    out = io.StringIO()
    # argparse wraps help to $COLUMNS; pin it so the page does not depend on the terminal that built it
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse's --help exits
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return int(code or 0), out.getvalue()


class CliHelp(SphinxDirective):
    optional_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        command = self.arguments[0] if self.arguments else None
        shown = f"lightning-recipes {command + ' ' if command else ''}--help"
        code, text = cli_help(command)
        if code != 0 or not text.strip():
            logger.warning(
                "`%s` exited with %s and printed %d characters",
                shown,
                code,
                len(text),
                location=self.get_location(),
            )
        block = nodes.literal_block(f"$ {shown}\n{text.rstrip()}", f"$ {shown}\n{text.rstrip()}")
        block["language"] = "text"
        return [block]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("cli-help", CliHelp)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
