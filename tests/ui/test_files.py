"""The console's files as the gateway serves them: every one the page needs, with the headers a
careful console sends, behind the same authentication as the API, and none when it is off."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import httpx

from service.security.users import add_user
from service.ui import docs_asset_paths
from service.ui.router import MEDIA_TYPES
from tests.conftest import start_gateway

ROOT = Path(__file__).resolve().parents[2]
STATIC = resources.files("service.ui") / "static"


def _static_files() -> dict[str, str]:
    return {entry.name: entry.read_text() for entry in STATIC.iterdir() if entry.is_file()}


async def test_the_page_and_every_file_it_loads_are_served(client: httpx.AsyncClient):
    page = await client.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert 'data-read-only="false"' in page.text
    wanted = set(re.findall(r'(?:src|href)="ui/([^"]+)"', page.text))
    for source in _static_files().values():  # the modules the page's script imports
        wanted |= set(re.findall(r'from "\./([^"]+)"', source))
    assert {"main.js", "console.css", "favicon.svg", "api.js"} <= wanted
    for name in sorted(wanted):
        r = await client.get(f"/ui/{name}")
        assert r.status_code == 200, name
        assert r.headers["content-type"] == MEDIA_TYPES[name[name.rfind(".") :]]


async def test_the_headers_of_a_careful_console(client: httpx.AsyncClient):
    for path in ("/ui", "/ui/main.js"):
        r = await client.get(path)
        csp = dict(part.strip().split(" ", 1) for part in r.headers["content-security-policy"].split(";"))
        assert csp["default-src"] == "'none'"
        assert csp["script-src"] == "'self'"  # no inline script, no eval
        assert csp["connect-src"] == "'self'"  # the page talks to its own gateway only
        assert csp["frame-ancestors"] == "'none'"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        again = await client.get(path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and not again.content


async def test_head_is_answered_as_get_without_a_body(client: httpx.AsyncClient):
    """``HEAD`` on the console's page and files, and on the API docs' pages and files, as a link
    checker or ``curl -I`` sends it: GET's status and headers, no body."""
    paths = ["/ui", *(f"/ui/{name}" for name in sorted(_static_files()) if name != "index.html")]
    paths += ["/docs", "/redoc", "/docs/oauth2-redirect", *sorted(docs_asset_paths())]
    for path in paths:
        got, head = await client.get(path), await client.head(path)
        assert (head.status_code, got.status_code) == (200, 200), path
        assert head.content == b"", path
        for header in ("content-type", "content-length", "etag", "content-security-policy", "cache-control"):
            assert head.headers.get(header) == got.headers.get(header), (path, header)
        assert int(head.headers["content-length"]) == len(got.content), path
        if "etag" in got.headers:
            again = await client.head(path, headers={"If-None-Match": got.headers["etag"]})
            assert again.status_code == 304 and not again.content, path


def test_no_inline_script_style_or_eval():
    files = _static_files()
    page = files["index.html"]
    assert all('src="' in tag for tag in re.findall(r"<script[^>]*>", page)), "a script without src"
    for name, text in files.items():
        assert not re.search(r"\son[a-z]+=", text), f"{name}: an inline event handler"
        assert "style=" not in text, f"{name}: an inline style"
        if name.endswith(".js"):
            assert not re.search(r"\beval\(|new Function\(|innerHTML|outerHTML|insertAdjacentHTML", text), (
                name
            )


async def test_unknown_files_are_404_and_the_page_is_only_at_ui(client: httpx.AsyncClient):
    for path in ("/ui/nothing.js", "/ui/index.html", "/ui/..%2Fsettings.py"):
        r = await client.get(path)
        assert r.status_code in (404, 422), path
        assert "error_code" in r.json()
    r = await client.get("/ui/")
    assert r.status_code == 307 and r.headers["location"].endswith("/ui")


def test_an_installed_package_holds_the_files():
    """pyproject's package data covers every file of the console (a wheel installs them)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service.ui"]
    for name in _static_files():
        assert any(fnmatch(f"static/{name}", pattern) for pattern in patterns), name


async def test_off_and_read_only_are_settings(tmp_path: Path):
    off = await start_gateway(tmp_path / "off", ui=False)
    read_only = await start_gateway(tmp_path / "read-only", ui_read_only=True)
    try:
        assert (await off.client.get("/ui")).status_code == 404
        assert (await off.client.get("/ui/main.js")).status_code == 404
        page = await read_only.client.get("/ui")
        assert 'data-read-only="true"' in page.text
    finally:
        for gw in (off, read_only):
            await gw.client.aclose()
            await gw.stop()


async def test_with_authentication_on_the_console_needs_credentials_too(tmp_path: Path):
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    gw = await start_gateway(tmp_path / "data", auth="basic", users_file=users)
    try:
        async with httpx.AsyncClient(base_url=gw.url) as anonymous:
            r = await anonymous.get("/ui")
            assert r.status_code == 401  # the browser asks for a user and a password
            assert r.headers["www-authenticate"].startswith("Basic ")
            assert (await anonymous.get("/ui/main.js")).status_code == 401
        async with httpx.AsyncClient(base_url=gw.url, auth=("alice", "alice-pw")) as alice:
            assert (await alice.get("/ui")).status_code == 200
            assert (await alice.get("/ui/main.js")).status_code == 200
    finally:
        await gw.client.aclose()
        await gw.stop()
