"""Sphinx configuration of the lightning_recipes documentation site.

Build it strictly (what CI and ``make docs`` run; every warning is an error)::

    sphinx-build -W --keep-going -n -b html docs docs/_build/html

Generated at build time, gitignored (docs/.gitignore): ``api/`` (the API pages, from ``__all__``),
``notebooks/`` (copies of ../notebooks, executed by the build) and ``benchmarks/`` (a copy of
../benchmarks/RESULTS.md).
No intersphinx: the build runs offline, so references to torch, Lightning and the standard library are
listed in ``nitpick_ignore_regex`` below instead of resolved; references to our own names must resolve.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))  # document this checkout, not whatever copy is installed

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("MPLBACKEND", "Agg")
# The notebooks' kernels inherit these: the documented size switch (smoke size unless the build is started
# with LIGHTNING_RECIPES_SMOKE=0, e.g. for a release's site) and one intra-op thread (tiny models).
os.environ.setdefault("LIGHTNING_RECIPES_SMOKE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import lightning_recipes  # noqa: E402

project = "lightning_recipes"
author = "lightning_recipes contributors"
copyright = "lightning_recipes contributors"
release = version = lightning_recipes.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx_autodoc_typehints",  # after napoleon
    "myst_nb",  # MyST markdown and notebooks (it loads myst_parser itself)
    "lr_api",  # docs/_ext: the API pages from __all__, missing docstrings fail, our references resolve
    "lr_cli",  # docs/_ext: .. cli-help:: <command>
    "lr_sources",  # docs/_ext: notebooks and README sections brought in at build time
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints", "requirements.txt"]
templates_path = ["_templates"]

# --- theme ---
html_theme = "furo"
html_title = f"lightning_recipes {release}"
html_static_path: list[str] = []

# --- notebooks: published executed, outputs and figures (the repository keeps them without outputs). Run at
# build time, each in a temporary folder; jupyter-cache keeps the outputs under _build/ (one cache per size),
# so a rebuild runs only a notebook whose code changed (after a library change: rm -rf docs/_build/.jupyter*).
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / f".jupyter_smoke{os.environ['LIGHTNING_RECIPES_SMOKE']}")
nb_execution_in_temp = True
nb_execution_timeout = 300  # seconds per cell
nb_execution_raise_on_error = True  # a failing notebook fails the build
nb_execution_show_tb = True
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]

# --- API ---
# Packages whose __all__ serves the package's own imports, not public API (docs/guides/versioning.md)
lr_api_internal = ("cli", "demos", "harness")
autosummary_generate = True
autosummary_generate_overwrite = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # defaults as written in the source (a registry object has a huge repr)
autodoc_inherit_docstrings = False
autoclass_content = "class"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
typehints_fully_qualified = False
always_document_param_types = False
typehints_document_rtype = False

# --- strictness: every reference to our names must resolve; others are external (no intersphinx offline) ---
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|lightning|lightning_fabric|pytorch_lightning|torchmetrics)(\..*)?"),
    (r"py:.*", r"(numpy|np|matplotlib)(\..*)?"),
    (r"py:.*", r"(typing|typing_extensions|collections|collections\.abc|types|enum|abc|dataclasses)\..*"),
    (r"py:.*", r"(pathlib|os|io|json|logging|argparse|contextlib|functools|datetime|concurrent)(\..*)?"),
    (r"py:.*", r"(rich|yaml|jsonargparse|sklearn|wandb|deepspeed|transformers|tensorboard)(\..*)?"),
    (r"py:.*", r"(Tensor|Module|Optimizer|LRScheduler|DataLoader|Dataset|Trainer|LightningModule)"),
    (r"py:.*", r"(LightningDataModule|Callback|Strategy|Path|Any|Callable|Iterable|Iterator|Sequence)"),
    (r"py:.*", r"(Mapping|Generator|Literal|TypeAlias|Self|NoneType|ndarray|Figure|Axes|Ellipsis)"),
    (r"py:.*", r"(MisconfigurationException)"),  # Lightning's, named bare in Raises: sections
]
