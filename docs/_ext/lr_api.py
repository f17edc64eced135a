"""The API reference, generated from the package's ``__all__`` lists on every build (never stale).

When the configuration is read (before Sphinx lists the sources and autosummary writes its stubs) this writes
``api/<module>.rst`` for the top-level package and each public module under it (every
``lightning_recipes.<name>`` without a leading underscore that has an ``__all__`` and is not one of conf.py's
``lr_api_internal``: packages the package uses itself, whose ``__all__`` is no promise to users). Each object
gets one page, under its home module: a public module that exports it and contains its definition, the most
specific one; the other modules that re-export it link to that page.

It also makes the build strict about our own names:

* a public name without a docstring is a warning (an error under ``-W``), type ``lr_api.missing_docstring``;
  data (constants, type aliases) is documented by a ``#:`` comment or a string after the assignment, found
  in the module that defines it;
* a reference to one of our objects by any import path (``lightning_recipes.optim.lion.Lion``, as type
  hints and ``:class:`` roles in docstrings write them) resolves to its page; one to an object that exists
  but has no page (a private helper, an instance attribute) renders as code without a link; one to a name
  that does not exist (renamed, removed, misspelt) stays a broken reference, an error under ``-n -W``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "lightning_recipes"  # the documented package: conf.py's ``lr_api_package`` (set at config-inited)
INTERNAL: tuple[str, ...] = ()  # conf.py's ``lr_api_internal``: ``<name>`` of modules that get no page
API_DIR = "api"  # relative to the docs source directory; generated, gitignored


@dataclass
class PublicName:
    module: str  # the public module whose __all__ lists it
    name: str
    obj: Any


@dataclass
class ApiIndex:
    modules: list[str] = field(default_factory=list)  # public modules, top package first
    exports: dict[str, list[PublicName]] = field(default_factory=dict)  # module -> its __all__, in order
    home: dict[tuple[str, int], str] = field(default_factory=dict)  # (name, id(obj)) -> home module

    def canonical(self, entry: PublicName) -> str:
        return f"{self.home[_key(entry.name, entry.obj)]}.{entry.name}"


def _key(name: str, obj: Any) -> tuple[str, int]:
    return name, id(obj)


def public_modules() -> list[str]:
    """The top package and every ``lightning_recipes.<name>`` (module or subpackage) with an ``__all__``, but
    the internal ones."""
    package = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for path in sorted(Path(package.__file__).parent.iterdir()):
        stem = path.stem if path.suffix == ".py" else path.name
        if stem.startswith("_") or stem in INTERNAL:
            continue
        if not (path.suffix == ".py" or (path / "__init__.py").exists()):
            continue
        module = importlib.import_module(f"{PACKAGE}.{stem}")
        if hasattr(module, "__all__"):
            names.append(module.__name__)
    return names


def build_index() -> ApiIndex:
    index = ApiIndex(modules=public_modules())
    exporters: dict[tuple[str, int], list[str]] = {}
    for modname in index.modules:
        module = sys.modules[modname]
        entries = [PublicName(modname, name, getattr(module, name)) for name in module.__all__]
        index.exports[modname] = [e for e in entries if not _is_dunder(e.name)]
        for entry in index.exports[modname]:
            exporters.setdefault(_key(entry.name, entry.obj), []).append(modname)
    for key, modules in exporters.items():
        index.home[key] = _home_module(sys.modules[modules[0]].__dict__[key[0]], modules)
    return index


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")  # __version__: shown on the index page, not an API


def _home_module(obj: Any, modules: list[str]) -> str:
    """The module whose page documents ``obj``: a submodule over the top package, one that contains the
    definition over one that only re-exports it, then the most specific (deepest) name."""
    defined_in = None if _is_data(obj) else getattr(obj, "__module__", None)
    defined_in = defined_in or _data_home(obj, modules) or ""

    def rank(modname: str) -> tuple[bool, bool, int, str]:
        contains = defined_in == modname or defined_in.startswith(modname + ".")
        return modname != PACKAGE, contains, modname.count("."), modname

    return max(modules, key=rank)


def _data_home(obj: Any, modules: list[str]) -> str | None:
    for modname, _, _ in _data_definitions(obj):
        return modname
    return None


def _data_definitions(obj: Any) -> list[tuple[str, str, list[str]]]:
    """(module, name, doc lines) for every loaded module of the package that binds ``obj`` to a documented
    name (a ``#:`` comment or a docstring after the assignment)."""
    found = []
    for modname, module in sorted(sys.modules.items()):
        if not (modname == PACKAGE or modname.startswith(PACKAGE + ".")) or module is None:
            continue
        names = [n for n, v in vars(module).items() if v is obj and not n.startswith("__")]
        if not names:
            continue
        try:
            attr_docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except Exception:  # a module without source (compiled) has no doc comments
            continue
        found += [(modname, n, list(attr_docs[("", n)])) for n in names if ("", n) in attr_docs]
    return found


def data_doc(name: str, obj: Any) -> list[str]:
    """The doc comment of a public data name, from the module that defines it (``[]`` when there is none)."""
    for _, found_name, lines in _data_definitions(obj):
        if found_name == name:
            return [line for line in lines]
    return []


def _is_data(obj: Any) -> bool:
    """Constants and type aliases (``Literal[...]``, ``dict[str, int]``): documented by a doc comment, not by
    ``__doc__`` (which is their type's)."""
    if isinstance(obj, types.GenericAlias) or typing.get_origin(obj) is not None:
        return True
    return not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj))


def missing_docstring(entry: PublicName) -> bool:
    if _is_data(entry.obj):
        return not any(line.strip() for line in data_doc(entry.name, entry.obj))
    if inspect.isclass(entry.obj):  # a class's own docstring, not one inherited from a base
        own = entry.obj.__dict__.get("__doc__")
    else:
        own = getattr(entry.obj, "__doc__", None)
    return not (own or "").strip()


# --- page writing ---


def _title(text: str) -> list[str]:
    return [text, "=" * len(text), ""]


def module_page(index: ApiIndex, modname: str) -> str:
    own = [e for e in index.exports[modname] if index.canonical(e) == f"{modname}.{e.name}"]
    elsewhere = [e for e in index.exports[modname] if e not in own]
    lines = [f".. This page is generated by docs/_ext/lr_api.py from {modname}.__all__; do not edit.", ""]
    lines += _title(f"``{modname}``")
    lines += [f".. automodule:: {modname}", "   :no-members:", "", f".. currentmodule:: {modname}", ""]
    if own:
        lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        lines += [f"   {e.name}" for e in own] + [""]
    if elsewhere:
        heading = "Also exported here" if own else "Exports"
        lines += [heading, "-" * len(heading), ""]
        if own:
            lines += ["Documented on the page of the module that defines them:", ""]
        lines += [".. currentmodule:: None", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   ~{index.canonical(e)}" for e in elsewhere] + [""]
    return "\n".join(lines)


def api_index_page(index: ApiIndex) -> str:
    lines = [".. This page is generated by docs/_ext/lr_api.py; do not edit.", ""]
    lines += _title("API reference")
    lines += [
        "Every name in the ``__all__`` of the package and of each public module, one page per object. "
        "Names re-exported by several modules (most are importable from ``lightning_recipes`` itself) are "
        "documented once, under the module that defines them.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
    ]
    lines += [f"   {modname}" for modname in index.modules] + [""]
    return "\n".join(lines)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(app: Sphinx, config: Any) -> None:
    """Write the pages before Sphinx lists the sources (``config-inited``), so they are read this build."""
    global PACKAGE, INTERNAL
    PACKAGE, INTERNAL = config.lr_api_package, tuple(config.lr_api_internal)
    index = build_index()
    app.lr_api_index = index  # type: ignore[attr-defined]  # (not on env: objects do not pickle)
    for modname in index.modules:
        for entry in index.exports[modname]:
            if index.canonical(entry) == f"{modname}.{entry.name}" and missing_docstring(entry):
                logger.warning(
                    "public name %s.%s has no docstring (every name in __all__ needs one; data: a '#:' "
                    "comment above the assignment)",
                    modname,
                    entry.name,
                    type="lr_api",
                    subtype="missing_docstring",
                )
    out = Path(app.srcdir) / API_DIR
    pages = {"index.rst": api_index_page(index)}
    pages |= {f"{modname}.rst": module_page(index, modname) for modname in index.modules}
    out.mkdir(exist_ok=True)
    for stale in out.iterdir():  # pages of names no longer exported; autosummary rewrites generated/ itself
        if stale.name == "generated":
            shutil.rmtree(stale)
        elif stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        _write_if_changed(out / name, text)


# --- docstrings of data, references by any import path ---


def fill_data_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Data re-exported from another module: autodoc finds no ``#:`` comment there and falls back to the
    docstring of the value's type (``dict``, ``str``); use the comment of the module that defines it."""
    if not name.startswith(PACKAGE + ".") or not _is_data(obj):
        return
    own = data_doc(name.rsplit(".", 1)[1], obj)
    if own or lines == _type_doc(obj):
        lines[:] = own


def _type_doc(obj: Any) -> list[str]:
    from sphinx.util.docstrings import prepare_docstring

    doc = getattr(type(obj), "__doc__", None) or getattr(obj, "__doc__", None)
    return prepare_docstring(doc) if isinstance(doc, str) else []


_PROPERTY_FIRST_LINES: dict[str, str] = {}


def keep_property_summary(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Before napoleon: remember a property docstring's first line (see :func:`restore_property_summary`)."""
    if what == "property" and lines:
        _PROPERTY_FIRST_LINES[name] = lines[0]


def restore_property_summary(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Napoleon reads a property docstring's first line ``Device bytes: the sum ...`` as ``type: description``
    and turns the words before the colon into a type reference; put the sentence back as it was written."""
    first = _PROPERTY_FIRST_LINES.pop(name, None)
    if what != "property" or first is None or ":" not in first:
        return
    prefix, rest = (part.strip() for part in first.split(":", 1))
    stripped = [line.strip() for line in lines]
    if f":type: {prefix}" not in stripped or rest not in stripped:
        return
    del lines[stripped.index(f":type: {prefix}")]
    lines[[line.strip() for line in lines].index(rest)] = first.strip()


def _import_path(target: str) -> list[Any] | None:
    """The objects along ``target``: its longest importable module prefix, then each attribute; None when
    some part does not exist."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        path = [obj]
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
            path.append(obj)
        return path
    return None


_DOCSTRING_OF = re.compile(r"docstring of ([\w.]+)")


def _candidates(node: Any) -> list[str]:
    """Full names the target may mean: as written; relative to the object whose docstring holds it, its
    class and each module above it; relative to the page's class and module; else the one object of that
    name anywhere in the package (``:class:`DigitsCNN``` in a summary line of another module's page)."""
    target = node.get("reftarget", "").lstrip(".~")
    if target.startswith(PACKAGE + "."):
        return [target]
    contexts = []
    holder = _DOCSTRING_OF.search(node.source or "")
    if holder:
        contexts.append(holder[1])
        objects = _import_path(holder[1])
        if objects and not inspect.ismodule(objects[-1]):
            owner = objects[-1] if inspect.isclass(objects[-1]) else objects[-2]
            if inspect.isclass(owner):
                contexts.append(f"{owner.__module__}.{owner.__qualname__}")
    module, cls = node.get("py:module") or "", node.get("py:class") or ""
    contexts += [f"{module}.{cls}" if cls else module]
    found = []
    for context in contexts:
        parts = context.split(".")
        found += [".".join([*parts[:cut], target]) for cut in range(len(parts), 0, -1)]
    first = target.split(".")[0]
    anywhere = {
        id(getattr(mod, first)): f"{modname}.{target}"
        for modname, mod in sorted(sys.modules.items())
        if modname.startswith(PACKAGE + ".") and mod is not None and first in vars(mod)
    }
    if len(anywhere) == 1:
        found += list(anywhere.values())
    return list(dict.fromkeys(name for name in found if name.startswith(PACKAGE + ".")))


def _instance_attribute(candidate: str) -> bool:
    """``Class.name`` where ``name`` is an instance attribute the class sets (``self.name = ...``): it
    exists, but only on instances, so importing cannot find it."""
    owner_path, _, attr = candidate.rpartition(".")
    objects = _import_path(owner_path)
    if not objects or not inspect.isclass(objects[-1]):
        return False
    try:
        source = inspect.getsource(objects[-1])
    except (OSError, TypeError):
        return False
    return re.search(rf"self\.{re.escape(attr)}\b\s*(:[^=]*)?=", source) is not None


def resolve_our_reference(app: Sphinx, env: Any, node: Any, contnode: nodes.Element) -> nodes.Element | None:
    """A reference to one of our objects by any import path: a link to its page, or plain code when the
    object exists but has no page (a private helper); a name that does not import stays a broken reference."""
    index: ApiIndex | None = getattr(app, "lr_api_index", None)
    if node.get("refdomain") != "py" or index is None:
        return None
    for candidate in _candidates(node):
        objects = _import_path(candidate)
        if objects is None:
            if _instance_attribute(candidate):
                return contnode
            continue
        parts = candidate.split(".")
        attrs = parts[len(parts) - len(objects) + 1 :]
        # the deepest object along the path that has a page, then the attribute names after it
        for depth in range(len(objects) - 1, 0, -1):
            home = index.home.get(_key(attrs[depth - 1], objects[depth]))
            if home is None:
                continue
            rewritten = ".".join([home, attrs[depth - 1], *attrs[depth:]])
            domain = env.get_domain("py")
            for reftype in (node.get("reftype"), "obj"):
                resolved = domain.resolve_xref(
                    env, node["refdoc"], app.builder, reftype, rewritten, node, contnode
                )
                if resolved is not None:
                    return resolved
            break
        if inspect.ismodule(objects[-1]) and objects[-1].__name__ in index.modules:
            domain = env.get_domain("py")
            resolved = domain.resolve_xref(
                env, node["refdoc"], app.builder, "mod", objects[-1].__name__, node, contnode
            )
            if resolved is not None:
                return resolved
        return contnode  # exists, no page of its own (private, or an undocumented member): code, no link
    if _in_summary_table(node):
        # The first sentence of a docstring, copied into a module page's table, out of its class's context;
        # the same sentence on the object's own page is checked in context.
        return contnode
    return None


def _in_summary_table(node: Any) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.table) and "autosummary" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autosummary")
    app.add_config_value("lr_api_package", "lightning_recipes", "env", types=[str])
    app.add_config_value("lr_api_internal", (), "env", types=[tuple, list])
    app.connect("config-inited", generate)  # before the source files are listed and autosummary writes stubs
    app.connect("autodoc-process-docstring", fill_data_docstring)
    app.connect("autodoc-process-docstring", keep_property_summary, priority=100)  # napoleon's runs at 500
    app.connect("autodoc-process-docstring", restore_property_summary, priority=900)
    app.connect("missing-reference", resolve_our_reference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
