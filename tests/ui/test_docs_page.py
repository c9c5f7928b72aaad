"""The API documentation pages, ``/docs`` and ``/redoc``: every file they load is the gateway's own,
they run no inline script and cannot be framed, and Swagger UI renders in Chromium under that
policy (no CSP violation logged: ``no_page_errors``)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx

from tests.e2e.gateway_process import GatewayProcess

from .browser import Browser

PAGES = ("/docs", "/redoc", "/docs/oauth2-redirect")


class _Links(HTMLParser):
    """Every URL a page names (src, href, spec-url, data-*), and whether a script is inline."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts = 0
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and (name in ("src", "href", "spec-url") or name.startswith("data-")):
                self.urls.append(value)
        if tag == "script":
            self._in_script = True
            if not any(name == "src" for name, _ in attrs):
                self.inline_scripts += 1

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts += 1


def _csp(response: httpx.Response) -> dict[str, str]:
    header = response.headers["content-security-policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


def test_the_pages_load_only_the_gateways_own_files(api: httpx.Client):
    for page in PAGES:
        r = api.get(page)
        assert r.status_code == 200, page
        links = _Links()
        links.feed(r.text)
        assert links.inline_scripts == 0, f"{page}: an inline script"
        assert links.urls, page
        for url in links.urls:
            assert url.startswith("/") and not url.startswith("//"), f"{page} names another host: {url}"
            if url != "/openapi.json" and not url.endswith("/oauth2-redirect"):
                asset = api.get(url)
                assert asset.status_code == 200 and asset.content, url
                assert asset.headers["x-content-type-options"] == "nosniff"
        assert not re.search(r"https?://", r.text), f"{page} names a URL of another site"
    main = api.get("/docs/main.js").text  # the start script names no other site either
    assert not re.search(r"https?://", main)


def test_the_pages_policy_runs_own_scripts_only_and_forbids_framing(api: httpx.Client):
    for page in PAGES:
        r = api.get(page)
        csp = _csp(r)
        assert csp["default-src"] == "'none'", page
        assert csp["script-src"] == "'self'", page  # no inline script, no eval, no CDN
        assert csp["connect-src"] == "'self'", page
        assert csp["frame-ancestors"] == "'none'", page
        assert r.headers["x-frame-options"] == "DENY", page
        assert r.headers["x-content-type-options"] == "nosniff", page
    assert _csp(api.get("/docs"))["style-src"] == "'self'"


def test_swagger_ui_renders_under_its_policy(browser: Browser, console: GatewayProcess):
    browser.open(f"{console.url}/docs")
    browser.wait_text(".information-container .title", re.compile("brokergate"))
    browser.find(".opblock-tag-section")  # the operations, from the gateway's own document
    browser.screenshot("docs")


def test_redoc_renders_under_its_policy(browser: Browser, console: GatewayProcess):
    browser.open(f"{console.url}/redoc")
    browser.wait_text("h1", re.compile("brokergate"))
    browser.screenshot("redoc", whole=False)  # the page of every route is too tall to draw whole in time
    # ReDoc's build shows its "powered by" logo from its CDN: the policy blocks it, and that is
    # the only thing it blocks (any other error fails the test, as ``no_page_errors`` would).
    errors = [m for m in browser.log() if m.startswith("SEVERE")]
    assert all("cdn.redoc.ly" in m and "has been blocked" in m for m in errors), errors
