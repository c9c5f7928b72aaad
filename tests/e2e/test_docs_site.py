"""The documentation site builds without a warning, opens with the README and has the README's
map for its menu; the README's map leads to pages and headings that exist, and every setting is
documented on some page."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from service.settings import Settings
from tests.e2e.docs_blocks import DOCS, ROOT, pages


@dataclass
class Site:
    """A build of the site: its directory and what mkdocs said."""

    root: Path
    log: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site as ``make docs`` builds it, with ``--strict``."""
    root = tmp_path_factory.mktemp("docs") / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    return Site(root, built.stderr)


def test_the_site_builds_strict_without_a_warning(site):
    """mkdocs with ``--strict``: a broken link between pages, a missing anchor, a page left out
    of the nav fails the build (mkdocs.yml makes each a warning)."""
    assert "WARNING" not in site.log, site.log
    assert (site.root / "index.html").exists()


@dataclass
class Page:
    """What a reader sees of a page of the site (as mkdocs' own theme lays it out): the main
    menu's entries (title, link), and the headings and code blocks of its content, in order."""

    menu: list[tuple[str, str]]
    headings: list[str]
    code: list[str]

    @classmethod
    def built(cls, site: Site, path: str) -> Page:
        html = (site.root / path).read_text()
        top_bar = html.split('<ul class="nav navbar-nav">', 1)[1]
        menu = top_bar.split("</ul>", 1)[0]  # the top bar's first list: the pages
        content = html.split('role="main">', 1)[1]
        return cls(
            menu=[
                (unescape(title.strip()), href)
                for href, title in re.findall(r'<a href="([^"]*)" class="nav-link[^"]*"[^>]*>(.*?)</a>', menu)
            ],
            headings=[
                unescape(t) for t in re.findall(r"<h[1-6] id=[^>]*>(.*?)<a class=\"headerlink\"", content)
            ],
            code=[unescape(c) for c in re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", content, re.S)],
        )


def fenced_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```\w*\n(.*?)^```", markdown, re.S | re.M)


def headings(markdown: str) -> list[str]:
    """The headings' titles, in order (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)


def readme_map(readme: str) -> list[tuple[str, str]]:
    """The README's map of the pages: (title, page), in its order."""
    return re.findall(r"^\| \[([^\]]+)\]\(docs/([^)#]+)\.md\) \|", readme, re.M)


def test_the_front_page_is_the_readme(site):
    """The site opens with the README, built from it: what brokergate is, the two commands, the
    walk-through with curl and every command of it, the next steps and the map."""
    readme = (ROOT / "README.md").read_text()
    front = Page.built(site, "index.html")
    assert front.headings == headings(readme)
    assert "A walk-through with curl" in front.headings, front.headings
    assert front.code == fenced_blocks(readme)


def test_the_menu_names_the_pages_as_the_readme_map_does(site):
    """The site's menu, after its front page, is the README's map: the same pages, in the same
    order, under the same names."""
    menu = Page.built(site, "index.html").menu
    assert menu[0] == ("Home", "."), menu
    readme = (ROOT / "README.md").read_text()
    assert menu[1:] == [(title, f"{page}/") for title, page in readme_map(readme)]


def anchors(page: Path) -> set[str]:
    """The ids mkdocs gives the page's headings (code blocks left out)."""
    return {slugify(title, "-") for title in headings(page.read_text())}


def test_the_readme_links_to_pages_and_headings_that_exist():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", readme)
    unmapped = {f"docs/{page.name}" for page in DOCS.glob("*.md")} - {page for page, _ in links}
    assert not unmapped, f"pages the README's map does not lead to: {sorted(unmapped)}"
    for page, anchor in links:
        target = ROOT / page
        assert target.is_file(), f"README links to {page}, which is not there"
        if anchor:
            assert anchor in anchors(target), f"README links to {page}#{anchor}, a heading it does not have"


def test_every_setting_is_documented():
    text = "\n".join(page.read_text() for page in pages())
    missing = [name for name in Settings.model_fields if f"`{name.upper()}`" not in text]
    assert not missing, f"settings the docs do not document: {missing}"
