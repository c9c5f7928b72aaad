"""Fixtures of the web console's tests: a gateway process, a browser per module, and an API client.

Screenshots are test artifacts: they go to ``BROKERGATE_UI_ARTIFACTS`` (a directory, created if
need be), else to a temporary directory that pytest keeps for its last few runs. Two of them are
in the docs' console page: ``records.png`` and ``group.png``, copied from a run's artifacts to
``docs/img/`` when the pages change.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess

from .browser import Browser

ARTIFACTS_ENV = "BROKERGATE_UI_ARTIFACTS"


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get(ARTIFACTS_ENV)
    if where:
        path = Path(where)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("ui-artifacts")


@pytest.fixture(scope="module")
def browser(artifacts: Path) -> Iterator[Browser]:
    browser = Browser(artifacts)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(autouse=True)
def no_page_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each browser test: the page threw no error and broke no rule of its CSP. (A refused
    request is logged too, as the network's; those a test provokes are not errors of the page.)"""
    yield
    if "browser" in request.fixturenames:
        browser: Browser = request.getfixturevalue("browser")
        errors = [m for m in browser.log() if m.startswith("SEVERE") and "Failed to load resource" not in m]
        assert not errors, f"the page logged errors: {errors}"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway serving the console, as ``brokergate serve`` does, for the tests of a module."""
    env = {"BROKERGATE_PUSH_ALLOWED_DESTINATIONS": "http://127.0.0.1", "BROKERGATE_PUSH_REFRESH_MS": "200"}
    gateway = GatewayProcess(tmp_path_factory.mktemp("console") / "data", env=env).start()
    try:
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def api(console: GatewayProcess) -> Iterator[httpx.Client]:
    """A client of the same gateway: what other applications do while the console looks on."""
    with httpx.Client(base_url=console.url, timeout=30) as client:
        yield client


@pytest.fixture
def name() -> str:
    """A unique topic or group name for one test."""
    return f"ui-{uuid.uuid4().hex[:8]}"
