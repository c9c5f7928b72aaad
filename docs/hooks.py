"""The site's front page is the README, taken from it each time the site is built.

An mkdocs hook (``hooks:`` in ``mkdocs.yml``): ``on_files`` adds ``index.md``, made from the
README at the repository's root, so the site opens with what a visitor of the repository sees
first (what brokergate is, the two commands, the walk-through with curl, the next steps and the
map of these pages) and the two cannot drift apart. The README's links are written from the
root: ``docs/cli.md`` becomes ``cli.md``; a link to a file outside ``docs/`` (``SECURITY.md``,
``openapi.yaml``), which the site does not hold, keeps its text and loses its target.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[1] / "README.md"

_FENCE = re.compile(r"^```.*?^```[^\n]*\n?", re.S | re.M)
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_ELSEWHERE = re.compile(r"^([a-z][a-z0-9+.-]*:|#)")  # a URL with a scheme, or an anchor of the page


def _relinked(match: re.Match[str]) -> str:
    text, target = match.group("text"), match.group("target")
    if _ELSEWHERE.match(target):
        return match.group(0)
    if target.startswith("docs/") and target != "docs/":
        return f"[{text}]({target.removeprefix('docs/')})"
    return text


def front_page(readme: str) -> str:
    """The README as a page of the site: its links to ``docs/`` pages made relative to the site,
    its links to the repository's other files reduced to their text; code blocks as they are."""
    parts: list[str] = []
    done = 0
    for block in _FENCE.finditer(readme):
        parts.append(_LINK.sub(_relinked, readme[done : block.start()]))
        parts.append(block.group(0))
        done = block.end()
    parts.append(_LINK.sub(_relinked, readme[done:]))
    return "".join(parts)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=front_page(README.read_text())))
    return files
