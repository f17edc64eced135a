"""The documentation site: the strict Sphinx build (once per session; ``LR_DOCS_HTML`` reuses a build), its
internal links, the missing-docstring check, and the pages in a headless browser."""

from __future__ import annotations

import fcntl
import html
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.lightning_free  # the build runs in a subprocess; no Trainer here

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

REQUIRED = os.environ.get("LR_REQUIRE_BROWSER") == "1"  # CI sets it: a missing tool fails instead of skipping


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"LR_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _require_sphinx() -> None:
    """Checked in the tests, not at import: the floor pass collects this module in a venv without Sphinx."""
    try:
        import sphinx  # noqa: F401
    except ImportError:
        _unavailable("the docs requirements are not installed (pip install --group docs)")


def sphinx_build(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The strict build, as ``make docs`` runs it, in a subprocess of this interpreter."""
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [*command, str(source), str(out)], capture_output=True, text=True, env=env, timeout=900, check=False
    )


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The strictly built site, one build per session shared by xdist workers (or ``LR_DOCS_HTML=<dir>``)."""
    _require_sphinx()
    prebuilt = os.environ.get("LR_DOCS_HTML")
    if prebuilt:
        if not (Path(prebuilt) / "index.html").exists():
            pytest.fail(f"LR_DOCS_HTML={prebuilt!r} holds no index.html: run `make docs` first")
        return Path(prebuilt).resolve()
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # pytest-<n>/popen-gw<i>: the parent is this session's, common to its workers
    out, log = shared / "docs-html", shared / "docs-build.log"
    with (shared / "docs-build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "index.html").exists() and not log.exists():
            started = time.perf_counter()
            result = sphinx_build(DOCS, out, "-d", str(shared / "docs-doctrees"))
            log.write_text(
                f"exit {result.returncode} after {time.perf_counter() - started:.1f} s\n"
                f"{result.stdout}\n{result.stderr}"
            )
    report = log.read_text()
    if not report.startswith("exit 0 "):
        pytest.fail(f"the strict docs build failed:\n{report[-6000:]}")
    return out


def test_strict_build_makes_the_pages(built_site: Path) -> None:
    pages = {p.relative_to(built_site).as_posix() for p in built_site.rglob("*.html")}
    guides = [f"guides/{name}.html" for name in ("preflight", "health_monitor", "stability_guard")]
    cli = [f"cli/{name}.html" for name in ("index", "demo", "preflight", "memory", "tune")]
    notebooks = ["notebooks/index.html", "notebooks/01_quickstart.html"]
    api = ["api/index.html", "api/lightning_recipes.html", "api/generated/lightning_recipes.optim.Lion.html"]
    expected = {"index.html", "quickstart.html", *guides, *cli, *notebooks, *api}
    assert expected <= pages, sorted(expected - pages)
    # every public name of the package has a page (under the module that defines it)
    import lightning_recipes

    api_pages = " ".join(p for p in pages if p.startswith("api/generated/"))
    names = [n for n in lightning_recipes.__all__ if not n.startswith("__")]
    missing = [n for n in names if f".{n}.html" not in api_pages]
    assert not missing, missing
    # the packages the library uses itself are no public API (docs/guides/versioning.md): no page, no name
    internal = ("lightning_recipes.harness", "lightning_recipes.demos", "lightning_recipes.cli")
    assert not [p for p in pages if p.startswith(tuple(f"api/{m}" for m in internal))]
    assert not [p for p in pages if p.startswith(tuple(f"api/generated/{m}." for m in internal))]
    # the notebooks are published executed: their text output and their figures
    quickstart = (built_site / "notebooks/01_quickstart.html").read_text()
    assert re.search(r"final val_acc=0\.\d+", quickstart), "01_quickstart's page has no output"
    assert re.search(r'<img [^>]*src="[^"]+\.png"', quickstart), "01_quickstart's page has no figure"
    # a CLI page shows the help text the code prints, generated at build time
    assert "usage: lightning-recipes preflight" in (built_site / "cli/preflight.html").read_text()


_ATTRIBUTE = re.compile(r"""<(\w+)|\s(href|src|id|name)=(?:"([^"]*)"|'([^']*)')""")


def _parse(page: Path) -> tuple[list[str], set[str]]:
    """The href/src values and the element ids of a page (a regex: faster than html.parser)."""
    links: list[str] = []
    ids: set[str] = set()
    tag = ""
    for match in _ATTRIBUTE.finditer(page.read_text(encoding="utf-8")):
        if match[1]:
            tag = match[1].lower()
            continue
        value = html.unescape(match[3] if match[3] is not None else match[4])
        if match[2] in {"href", "src"}:
            links.append(value)
        elif match[2] == "id" or tag == "a":
            ids.add(value)
    return links, ids


def test_no_dead_internal_links(built_site: Path) -> None:
    """Every relative href/src of every built page exists, anchors too (http(s) links: no network here)."""
    parsed: dict[Path, tuple[list[str], set[str]]] = {}
    dead = []
    pages = sorted(built_site.rglob("*.html"))
    for page in pages:
        links, _ = parsed[page] = parsed.get(page) or _parse(page)
        for link in links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:", "javascript:")):
                continue  # external: cannot be checked offline
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                dead.append(f"{page.relative_to(built_site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                _, ids = parsed[target] = parsed.get(target) or _parse(target)
                if unquote(parts.fragment) not in ids:
                    dead.append(f"{page.relative_to(built_site)}: {link} (no id {parts.fragment!r})")
    assert len(pages) > 100
    assert not dead, "\n".join(dead[:50])


def test_missing_docstring_fails_the_build(tmp_path: Path) -> None:
    """docs/_ext/lr_api.py: a public name without a docstring fails ``-W``; with one, it builds."""
    _require_sphinx()
    package = tmp_path / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """A throwaway package."""

            __all__ = ["documented", "undocumented"]


            def documented() -> int:
                """Has a docstring."""
                return 1


            def undocumented() -> int:
                return 2
            '''
        )
    )
    source = tmp_path / "docs"
    source.mkdir()
    (source / "conf.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = [{str(DOCS / "_ext")!r}, {str(tmp_path)!r}]
            extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "lr_api"]
            lr_api_package = "toypkg"
            nitpicky = True
            """
        )
    )
    (source / "index.rst").write_text("Toy\n===\n\n.. toctree::\n\n   api/index\n")

    failed = sphinx_build(source, tmp_path / "html", "-E")
    assert failed.returncode != 0
    assert "toypkg.undocumented has no docstring" in failed.stderr, failed.stderr

    init = package / "__init__.py"
    docstring = '    """Now it has one."""\n'
    documented = init.read_text().replace("-> int:\n    return 2", f"-> int:\n{docstring}    return 2")
    init.write_text(documented)
    passed = sphinx_build(source, tmp_path / "html", "-E")
    assert passed.returncode == 0, passed.stderr
    assert (tmp_path / "html" / "api" / "generated" / "toypkg.undocumented.html").exists()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        _unavailable(f"no Chromium at {CHROMIUM} with its driver at {CHROMEDRIVER} (Debian: chromium-driver)")
    try:
        from selenium import webdriver
    except ImportError:
        _unavailable("selenium is not installed (pip install --group docs)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    # a window wide enough that furo shows the sidebar, tall enough for its top level
    flags += [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}", "--window-size=1400,2000"]
    for flag in flags:
        options.add_argument(flag)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SE_OFFLINE", "true")  # explicit paths above; Selenium Manager must not download anything
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        driver.set_page_load_timeout(60)
        try:
            yield driver
        finally:
            driver.quit()


def test_browser_index_and_an_api_page_render_and_navigate(built_site: Path, browser: object) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    wait = WebDriverWait(driver, 30)  # type: ignore[arg-type]

    def click(link: object) -> None:
        """Scroll the link into view first: furo's sidebar scrolls on its own, past the window's height."""
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)  # type: ignore[attr-defined]
        link.click()  # type: ignore[attr-defined]

    def click_in_article(link_text: str) -> None:
        click(driver.find_element(By.CSS_SELECTOR, "article").find_element(By.LINK_TEXT, link_text))  # type: ignore[attr-defined]

    driver.get((built_site / "index.html").as_uri())  # type: ignore[attr-defined]
    wait.until(expected_conditions.title_contains("lightning_recipes"))
    sidebar = driver.find_element(By.CSS_SELECTOR, ".sidebar-tree")  # type: ignore[attr-defined]
    assert sidebar.is_displayed()
    for entry in ("Quick start", "API reference", "lightning-recipes preflight"):
        assert entry in sidebar.text, sidebar.text

    click(sidebar.find_element(By.LINK_TEXT, "API reference"))  # through the navigation
    wait.until(expected_conditions.url_contains("api/index.html"))
    assert driver.title.startswith("API reference")  # type: ignore[attr-defined]
    click_in_article("lightning_recipes.optim")
    wait.until(expected_conditions.url_contains("api/lightning_recipes.optim.html"))
    click_in_article("Lion")
    wait.until(expected_conditions.url_contains("lightning_recipes.optim.Lion.html"))

    signature = driver.find_element(By.CSS_SELECTOR, "dt.sig.sig-object.py")  # type: ignore[attr-defined]
    assert signature.get_attribute("id") == "lightning_recipes.optim.Lion"
    for part in ("Lion", "lr", "betas", "weight_decay"):
        assert part in signature.text, signature.text
    body = driver.find_element(By.CSS_SELECTOR, "dl.py.class > dd").text  # type: ignore[attr-defined]
    assert "sign-momentum" in body and "Chen et al. 2023" in body, body[:500]

    driver.back()  # type: ignore[attr-defined]
    wait.until(expected_conditions.url_contains("api/lightning_recipes.optim.html"))
    assert "lightning_recipes.optim" in driver.title  # type: ignore[attr-defined]
    click_in_article("Lion")  # the page it came back to still navigates
    wait.until(expected_conditions.url_contains("lightning_recipes.optim.Lion.html"))
