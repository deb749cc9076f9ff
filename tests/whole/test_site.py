"""The documentation site as a reader gets it: built with mkdocs (as CI
builds it) and opened in a real headless browser (Chromium, from Debian's
``chromium`` package), every page of the navigation is linked from the
page, and the API reference shows the classes and methods rendered from
the docstrings."""

from __future__ import annotations

import html
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("mkdocs", "mkdocstrings", "yaml"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (a test extra): pip install '.[test]'")
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def rendered(page: Path) -> str:
    """The page's DOM after Chromium loaded it and ran its scripts (nothing
    is fetched from the network: every host resolves to nowhere)."""
    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    if browser is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium)")
    done = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",  # as root in a container
            "--disable-gpu",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


def navigation() -> list[tuple[str, str]]:
    """(title, page) of each entry of mkdocs.yml's nav."""
    import yaml  # noqa: PLC0415 (a test extra, checked by the fixture)

    entries = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    return [next(iter(entry.items())) for entry in entries]


def test_every_page_of_the_navigation_is_linked_from_the_api_reference(site: Path) -> None:
    dom = rendered(site / "api" / "index.html")
    links = {html.unescape(href) for href in re.findall(r'href="([^"#]*)"', dom)}
    for title, page in navigation():
        target = ".." if page == "index.md" else f"../{page.removesuffix('.md')}/"
        if page == "api.md":
            target = "./"
        assert target in links, f"{title} ({page}) is not in the navigation"
        assert html.escape(title, quote=False) in dom or title in html.unescape(dom), title


def test_the_api_reference_shows_what_the_docstrings_say(site: Path) -> None:
    dom = html.unescape(rendered(site / "api" / "index.html"))
    anchors = ("asyncfs.Env", "asyncfs.Env.read_file", "asyncfs.Env.stat_files", "asyncfs.Env.metrics")
    for anchor in (*anchors, "asyncfs.ModularFileSystem", "asyncfs.Metrics", "asyncfs.StoreTraffic"):
        assert f'id="{anchor}"' in dom, anchor
    assert "The whole file at uri." in dom  # Env.read_file's docstring
    assert "a failure as that URI's entry" in dom  # ModularFileSystem.stat_files's


def test_the_cookbook_renders_its_recipes(site: Path) -> None:
    dom = html.unescape(rendered(site / "cookbook" / "index.html"))
    assert "Read a dataset from an object store into a training loop" in dom
    assert "env.prefetch(shards" in re.sub(r"<[^>]+>", "", dom)  # the code block, highlighted or not
