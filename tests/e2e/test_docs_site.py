"""The documentation site builds without a warning, the README's map leads to pages and headings
that exist, and every setting is documented on some page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

from service.settings import Settings
from tests.e2e.docs_blocks import DOCS, ROOT, pages


def test_the_site_builds_strict_without_a_warning(tmp_path):
    """mkdocs with ``--strict``: a broken link between pages, a missing anchor, a page left out
    of the nav fails the build (mkdocs.yml makes each a warning)."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (tmp_path / "site" / "index.html").exists()


def anchors(page: Path) -> set[str]:
    """The ids mkdocs gives the page's headings (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slugify(title, "-") for title in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)}


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
