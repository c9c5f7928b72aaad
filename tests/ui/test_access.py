"""The console as deployments restrict it, in the browser: read-only, and behind HTTP Basic with ACLs.

Neither is the console's own security: read-only hides what would change anything (the API
still takes what the principal may do), and with authentication on the browser sends the user's
credentials with every call, so the page shows and does what the ACLs let that user.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess, authorizing_gateway

from .api import create_topic, produce
from .browser import Browser

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("read-only") / "data"
    gateway = GatewayProcess(data, env={"BROKERGATE_UI_READ_ONLY": "true"}).start()
    try:
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """HTTP Basic and ACLs on: ``admin`` may do anything, ``alice`` what she is granted, ``bob`` nothing."""
    gateway = authorizing_gateway(tmp_path_factory.mktemp("guarded") / "data", USERS, super_user="admin")
    try:
        yield gateway
    finally:
        gateway.stop()


def signed_in_as(user: str, gateway: GatewayProcess) -> str:
    """The gateway's address with ``user``'s credentials: what a person types in the browser's
    sign-in prompt, given in the address instead (headless)."""
    return gateway.url.replace("://", f"://{user}:{USERS[user]}@")


def test_a_read_only_console_hides_create_delete_and_produce(browser: Browser, read_only: GatewayProcess):
    with httpx.Client(base_url=read_only.url) as api:
        create_topic(api, "catalog")
        produce(api, "catalog", [{"key": "lamp", "value": {"price": 25}}])
        browser.open(f"{read_only.url}/ui")
        browser.find('tr[data-topic="catalog"]')
        assert browser.visible(".read-only-badge") is not None
        assert browser.visible("#create-topic") is None
        assert browser.visible("button.danger") is None
        browser.click('tr[data-topic="catalog"] a')
        browser.find('#records-panel tr[data-offset="0"]')  # reading is what it is for
        assert browser.visible('.tabs a[data-tab="produce"]') is None
        assert browser.visible("#produce") is None
        browser.screenshot("read-only")
        # A setting of the console, not a permission: the API takes what the ACLs allow.
        produce(api, "catalog", [{"key": "desk", "value": {"price": 120}}])


def test_the_console_calls_the_api_with_the_users_credentials(browser: Browser, guarded: GatewayProcess):
    with httpx.Client(base_url=guarded.url, auth=("admin", USERS["admin"])) as admin:
        for topic in ("team-a.orders", "team-b.orders"):
            create_topic(admin, topic)
            produce(admin, topic, [{"value": {"from": topic}}])
        cluster = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        for operation in ("DESCRIBE", "READ"):
            binding = {
                "resource_type": "TOPIC",
                "resource_name": "team-a.",
                "pattern_type": "PREFIXED",
                "principal": "User:alice",
                "host": "*",
                "operation": operation,
                "permission": "ALLOW",
            }
            assert admin.post(f"/v3/clusters/{cluster}/acls", json=binding).status_code == 201

    browser.open(f"{signed_in_as('alice', guarded)}/ui#/topics")
    browser.find('tr[data-topic="team-a.orders"]')
    assert browser.text("#principal") == "signed in as User:alice"
    assert browser.visible('tr[data-topic="team-b.orders"]') is None  # listings show what she may see
    browser.click('tr[data-topic="team-a.orders"] a')
    assert "team-a.orders" in browser.find('#records-panel tr[data-offset="0"]').text

    browser.click('.tabs a[data-tab="produce"]')  # shown, and refused by the API: no WRITE for her
    browser.fill("#produce textarea[name=value]", '{"from": "alice"}')
    browser.click("#produce button[type=submit]")
    text = browser.wait_text("#produce-status .error", "Not authorized")
    assert "User:alice" in text and "ACL binding" in text


def test_a_user_who_may_see_nothing_is_told_there_may_be_more(browser: Browser, guarded: GatewayProcess):
    with httpx.Client(base_url=guarded.url, auth=("admin", USERS["admin"])) as admin:
        create_topic(admin, "payroll")
    browser.open(f"{signed_in_as('bob', guarded)}/ui#/topics")
    empty = "No topics you may see: there may be topics that User:bob is not allowed to describe."
    browser.wait_text("#topics-page tbody", empty)
    assert browser.text("#principal") == "signed in as User:bob"
    browser.screenshot("nothing-to-see")
    browser.click('a[data-nav="groups"]')
    browser.wait_text("#groups-page tbody", "there may be consumer groups that User:bob is not allowed")
