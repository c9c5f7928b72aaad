"""The web console in a real browser: Debian's Chromium, headless, on a ``brokergate serve``.

What a user does in it: create a topic, produce through the form and find the record in the
record browser (by offset, by time, by searching the page) and in the live tail, watch a
consumer group's lag move as it commits, and a share group's records in flight as its consumers
acquire and accept them. Other clients act through the API meanwhile, as they
would. The pages are saved as screenshots along the way (see conftest).
"""

from __future__ import annotations

import re

import httpx
from selenium.webdriver.support.expected_conditions import alert_is_present

from tests.e2e.gateway_process import GatewayProcess

from .api import V2, accept, acquire, cluster_id, commit, create_topic, fetch, join, produce, share_consumer
from .browser import Browser

ITEMS = ["lamp", "desk", "chair", "shelf", "rug", "mirror"]


def test_create_a_topic_in_the_form(browser: Browser, console: GatewayProcess, api: httpx.Client, name: str):
    browser.open(f"{console.url}/ui")
    browser.fill("#create-topic input[name=topic_name]", name)
    browser.fill("#create-topic input[name=partitions_count]", "3")
    browser.click("#create-topic button[type=submit]")
    browser.wait_text("#topics-page .notice", f"Created topic {name}.")
    row = browser.find(f'tr[data-topic="{name}"]')
    assert re.search(rf"{name}\s+3\s+1\s+0", row.text), row.text  # partitions, replication, records
    browser.screenshot("topics")

    browser.click(f'tr[data-topic="{name}"] a')
    browser.find(f'#topic-page[data-topic="{name}"] #partitions tr[data-partition="2"]')
    for partition in range(3):  # beginning and end offsets, records
        cells = browser.text(f'#partitions tr[data-partition="{partition}"]').split()
        assert cells[3:6] == ["0", "0", "0"], cells
    partitions = api.get(f"/topics/{name}/partitions").json()
    assert [p["partition"] for p in partitions] == [0, 1, 2]


def test_produce_through_the_form_then_find_the_record(
    browser: Browser, console: GatewayProcess, api: httpx.Client
):
    name = "orders"  # plain names (the module has a gateway of its own): the docs show this page
    create_topic(api, name)
    produce(
        api,
        name,
        [
            {
                "key": f"sku-{i}",
                "value": {"item": item, "qty": i + 1},
                "headers": [{"name": "source", "value": "YXBp"}],
            }
            for i, item in enumerate(ITEMS)
        ],
    )
    browser.open(f"{console.url}/ui#/topics/{name}/produce")
    browser.fill("#produce textarea[name=key]", '"alice"')
    # a 64-bit id a double would round: stored, and shown, as typed
    browser.fill("#produce textarea[name=value]", '{"item": "book", "qty": 1, "id": 12345678901234567891}')
    browser.fill("#produce textarea[name=headers]", "trace: t-1")
    browser.click("#produce button[type=submit]")
    browser.wait_text("#produce-status", "Stored in partition 0 at offset 6.")
    browser.wait_text('#partitions tr[data-partition="0"]', "7")  # the end offset moved

    stored = api.get(
        f"/topics/{name}/partitions/0/records",
        params={"offset": 6},
        headers={"Accept": "application/vnd.kafka.json.v2+json"},
    )
    assert '"id":12345678901234567891' in stored.text
    assert stored.json()["records"][0]["key"] == "alice"
    assert stored.json()["records"][0]["headers"] == [{"name": "trace", "value": "dC0x"}]

    browser.click("#produce-status a")  # "Show it": the record browser at its offset
    row = browser.find('#records-panel tr[data-offset="6"]')
    assert '"alice"' in row.text and "trace: t-1" in row.text and "12345678901234567891" in row.text, row.text

    browser.choose("#browse select[name=from]", "oldest")
    browser.click("#browse button[type=submit]")
    browser.find('#records-panel tr[data-offset="0"]')
    assert "source: api" in browser.text('#records-panel tr[data-offset="0"]')
    assert len(browser.all("#records-panel tbody tr")) == 7
    browser.screenshot("records")

    browser.fill("#records-panel input[name=search]", "BOOK")
    browser.wait_text("#matches", "1 of 7 records in this page match")
    assert [r.get_attribute("data-offset") for r in browser.all("#records-panel tbody tr")] == ["6"]
    browser.fill("#records-panel input[name=search]", "sku-3")
    browser.wait_text("#matches", "1 of 7")
    assert [r.get_attribute("data-offset") for r in browser.all("#records-panel tbody tr")] == ["3"]
    browser.fill("#records-panel input[name=search]", "nothing like it")
    browser.wait_text("#matches", "0 of 7")


def test_browse_from_a_time(browser: Browser, console: GatewayProcess, api: httpx.Client, name: str):
    create_topic(api, name)
    start = 1_767_225_600_000  # 2026-01-01 00:00 UTC; a record a minute
    produce(api, name, [{"value": {"minute": i}, "timestamp": start + i * 60_000} for i in range(6)])
    browser.open(f"{console.url}/ui#/topics/{name}/records")
    browser.find('#records-panel tr[data-offset="5"]')
    browser.choose("#browse select[name=from]", "time")
    # 00:02:30 in the browser's own time zone, as a person would type it
    local = browser.driver.execute_script(
        "const at = arguments[0]; const d = new Date(at);"
        "return new Date(at - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19)",
        start + 150_000,
    )
    browser.set_value("#browse input[name=time]", local)
    browser.click("#browse button[type=submit]")
    browser.wait(
        lambda: browser.visible('#records-panel tr[data-offset="0"]') is None, "the page to start later"
    )
    offsets = [r.get_attribute("data-offset") for r in browser.all("#records-panel tbody tr")]
    assert offsets == ["3", "4", "5"], offsets
    assert "2026-01-01 00:03:00.000 UTC" in browser.text('#records-panel tr[data-offset="3"]')


def test_the_live_tail_shows_what_the_form_produces(
    browser: Browser, console: GatewayProcess, api: httpx.Client, name: str
):
    create_topic(api, name, partitions=2)
    browser.open(f"{console.url}/ui#/topics/{name}/tail")
    browser.wait(lambda: len(browser.all("#tail-form input[name=partition]")) == 2, "a box per partition")
    browser.click("#tail-form button[name=toggle]")
    browser.wait(
        lambda: len(re.findall("live", browser.text(".streams"))) == 2, "both partitions' streams to open"
    )

    browser.click('.tabs a[data-tab="produce"]')  # the tail keeps running behind the other tab
    browser.choose("#produce select[name=partition]", "1")
    browser.fill("#produce textarea[name=key]", '"bob"')
    browser.fill("#produce textarea[name=value]", '{"item": "kettle"}')
    browser.click("#produce button[type=submit]")
    browser.wait_text("#produce-status", "Stored in partition 1 at offset 0.")
    produce(api, name, [{"value": {"item": "teapot"}, "partition": 0}])

    browser.click('.tabs a[data-tab="tail"]')
    row = browser.find('#tail tr[data-partition="1"][data-offset="0"]')
    assert '"bob"' in row.text and "kettle" in row.text, row.text
    assert "teapot" in browser.find('#tail tr[data-partition="0"][data-offset="0"]').text
    browser.screenshot("tail")
    browser.click("#tail-form button[name=toggle]")  # stop
    browser.wait(lambda: not browser.text(".streams"), "the streams to close")


def test_a_groups_lag_moves_as_it_commits(browser: Browser, console: GatewayProcess, api: httpx.Client):
    name, group = "payments", "billing"  # plain names, as for the records: the docs show this page
    create_topic(api, name, partitions=2)
    produce(api, name, [{"key": f"k{i}", "value": {"n": i}} for i in range(6)])
    member = join(api, group, name)
    fetch(api, member, 6)

    browser.open(f"{console.url}/ui#/groups/{group}")
    browser.wait_text("#group-about", "total lag 6")
    members = browser.text("#members")
    assert "m1" in members and f"{name}/0" in members and f"{name}/1" in members, members
    assert "none" in browser.text(f'#lags tr[data-topic="{name}"]')  # nothing committed yet

    produce(api, name, [{"key": f"k{i}", "value": {"n": i}} for i in range(6, 10)])
    browser.click("button[name=refresh]")
    browser.wait_text("#group-about", "total lag 10")
    commit(api, member)  # the six it fetched
    browser.click("button[name=refresh]")
    browser.wait_text("#group-about", "total lag 4")
    fetch(api, member, 4)
    commit(api, member)
    browser.click("button[name=refresh]")
    browser.wait_text("#group-about", "total lag 0")
    assert sum(int(cell.text) for cell in browser.all("#lags td.lag")) == 0
    browser.wait(lambda: len(browser.all("#lag-chart circle.dot")) >= 4, "four samples in the chart")
    assert "since this page opened" in browser.text("#chart-caption")
    browser.screenshot("group")

    browser.click('a[data-nav="groups"]')
    row = browser.find(f'#groups-page tr[data-group="{group}"]')
    assert "Stable" in row.text, row.text


def test_delete_a_topic(browser: Browser, console: GatewayProcess, api: httpx.Client, name: str):
    create_topic(api, name)
    browser.open(f"{console.url}/ui#/topics")
    browser.click(f'tr[data-topic="{name}"] button.danger')
    alert = browser.wait(lambda: alert_is_present()(browser.driver), "the confirmation")
    assert name in alert.text
    alert.accept()
    browser.wait_text("#topics-page .notice", f"Deleted topic {name}.")
    browser.wait(lambda: browser.visible(f'tr[data-topic="{name}"]') is None, "the row to go")
    assert api.get(f"/topics/{name}").status_code == 404


def test_a_share_groups_records_in_flight_and_lag(
    browser: Browser, console: GatewayProcess, api: httpx.Client
):
    name, group = "jobs", "workers"
    create_topic(api, name)
    produce(api, name, [{"value": {"job": i}} for i in range(5)])
    worker = share_consumer(api, group, "w1", name)
    held = acquire(api, worker, 3)

    browser.open(f"{console.url}/ui#/share-groups/{group}")
    browser.wait_text("#share-group-about", "3 records in flight, lag 5")
    assert "w1" in browser.text("#share-consumers") and name in browser.text("#share-consumers")
    row = browser.text(f'#share-partitions tr[data-topic="{name}"]')
    assert row.split()[1:4] == ["0", "0", "3"], row  # partition, start offset, end offset
    browser.screenshot("share-group")

    accept(api, worker, held)
    browser.click("button[name=refresh]")
    browser.wait_text("#share-group-about", "0 records in flight, lag 2")
    assert [cell.text for cell in browser.all("#share-partitions td.acquired")] == ["0"]

    browser.click('a[data-nav="share-groups"]')
    row_element = browser.find(f'#share-groups-page tr[data-group="{group}"]')
    assert "Stable" in row_element.text and "w1" not in row_element.text, row_element.text


def test_a_push_subscription_shows_its_status_and_pauses(
    browser: Browser, console: GatewayProcess, api: httpx.Client
):
    name = "to-nowhere"
    create_topic(api, "pushed")
    cid = cluster_id(api)
    spec = {
        "endpoint": "http://127.0.0.1:9/hook",  # nothing listens: every attempt is refused
        "topics": ["pushed"],
        "start": "earliest",
        "retry": {"min_backoff_ms": 100, "max_backoff_ms": 200, "max_attempts": 100},
    }
    r = api.put(f"/v3/clusters/{cid}/push-subscriptions/{name}", json=spec)
    assert r.status_code == 201, r.text
    produce(api, "pushed", [{"value": {"n": 1}}])

    browser.open(f"{console.url}/ui#/push/{name}")
    browser.wait_text("#push-about", "Active, delivered from this replica")
    browser.wait(lambda: "connection failed" in browser.text("#push-status"), "the last error to show")
    assert "http://127.0.0.1:9/hook" in browser.text("#push-spec")
    assert "object" not in browser.text("#push-status")  # every figure shown as a number or a text
    browser.screenshot("push-subscription")
    browser.click("button[name=toggle]")
    browser.wait_text("#push-about", "Paused")
    assert api.get(f"/v3/clusters/{cid}/push-subscriptions/{name}").json()["paused"] is True

    browser.click('a[data-nav="push"]')
    row = browser.find(f'#push-page tr[data-subscription="{name}"]')
    assert "paused" in row.text and "pushed" in row.text, row.text


def test_the_bar_says_who_the_console_acts_as(browser: Browser, console: GatewayProcess):
    browser.open(f"{console.url}/ui#/topics")
    assert browser.wait_text("#principal", "User:ANONYMOUS") == "User:ANONYMOUS (authentication off)"


def test_the_lag_chart_fills_its_card(
    browser: Browser, console: GatewayProcess, api: httpx.Client, name: str
):
    create_topic(api, name)
    produce(api, name, [{"value": {"n": i}} for i in range(3)])
    join(api, name, name)
    browser.open(f"{console.url}/ui#/groups/{name}")
    browser.find("#lag-chart svg")

    card, chart = browser.driver.execute_script(  # the card's width inside its padding, the chart's
        "const card = document.getElementById('lag-chart'); const style = getComputedStyle(card);"
        "return [card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight),"
        " card.querySelector('svg').getBoundingClientRect().width]"
    )
    assert chart >= card - 1, (chart, card)
    # its text as large as the page's own, whatever the card's width: drawn at the width it has
    tick = browser.driver.execute_script(
        "return document.querySelector('#lag-chart text.tick').getBoundingClientRect().height"
    )
    assert 10 <= tick <= 20, tick


def test_a_member_subscribed_to_a_topic_that_does_not_exist_shows_it(
    browser: Browser, console: GatewayProcess, api: httpx.Client, name: str
):
    create_topic(api, name)
    member = join(api, name, name)
    typo = f"{name}-typo"
    r = api.post(f"{member}/subscription", json={"topics": [name, typo]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text

    browser.open(f"{console.url}/ui#/groups/{name}")
    missing = browser.find('#members tr[data-member="m1"] .missing')
    assert missing.text == f"{typo} (does not exist)"
    assert browser.text('#members tr[data-member="m1"]').startswith(f"m1 {name}, {typo} (does not exist)")

    create_topic(api, typo)  # the typo made good: the member covers it, and the page says so
    browser.wait(lambda: f"{typo}/0" in browser.text("#members"), "the new topic assigned", timeout=30)
    browser.click("button[name=refresh]")
    browser.wait(lambda: browser.visible("#members .missing") is None, "the mark to go")
    assert f"{name}, {typo}" in browser.text('#members tr[data-member="m1"]')


def test_the_empty_live_tail_has_the_columns_it_fills(
    browser: Browser, console: GatewayProcess, api: httpx.Client, name: str
):
    create_topic(api, name)
    browser.open(f"{console.url}/ui#/topics/{name}/tail")
    browser.find("#tail-form input[name=partition]")

    def shares() -> list[float]:
        """Each column's share of the table's width."""
        return list(
            browser.driver.execute_script(
                "const table = document.getElementById('tail').getBoundingClientRect().width;"
                "return [...document.querySelectorAll('#tail th')]"
                ".map(th => th.getBoundingClientRect().width / table)"
            )
        )

    empty = shares()
    partition, offset, timestamp, _key, _headers, value = empty
    assert partition < 0.1 and offset < 0.1, empty  # numbers: narrow
    assert value > 0.35 and value == max(empty), empty  # the value: the widest
    assert 0.1 < timestamp < 0.22, empty  # a timestamp, whole on one line
    assert "No records yet" in browser.find("#tail tr.empty").text

    browser.click("#tail-form button[name=toggle]")
    browser.wait_text(".streams", "live")
    produce(api, name, [{"key": "k" * 40, "value": {"item": "x" * 400}}])
    browser.find('#tail tr[data-offset="0"]')
    assert browser.visible("#tail tr.empty") is None
    assert shares() == empty  # the columns stay where they were as records arrive
    browser.screenshot("tail-columns")
    browser.click("#tail-form button[name=toggle]")
    browser.wait(lambda: not browser.text(".streams"), "the streams to close")


def test_the_schema_registrys_topic_shows_no_delete_the_api_refuses(
    browser: Browser, console: GatewayProcess, api: httpx.Client
):
    r = api.post(  # the registry's first schema makes its topic
        "/schema-registry/subjects/ui-reserved-value/versions",
        json={"schema": '{"type": "string"}'},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    assert r.status_code == 200, r.text
    browser.open(f"{console.url}/ui#/topics")
    browser.click("#topics-page .head button")  # Refresh: the list as it is now
    reason = (
        "_schemas holds the schema registry's records: the gateway refuses to delete it or produce to it."
    )

    def delete_button() -> tuple[bool, str | None] | None:  # read in one look: the list may re-render
        button = browser.visible('tr[data-topic="_schemas"] button.danger')
        return None if button is None else (button.is_enabled(), button.get_attribute("title"))

    assert browser.wait(delete_button, "the _schemas row") == (False, reason)
    assert browser.find("#topics-page .reserved").text == reason  # said on the page, not in a tooltip only
    cid = api.get("/v3/clusters").json()["data"][0]["cluster_id"]
    assert api.delete(f"/v3/clusters/{cid}/topics/_schemas").status_code == 403  # what it spares the user

    browser.click('tr[data-topic="_schemas"] a')
    assert browser.find("#topic-page #reserved").text == reason
    assert browser.visible('.tabs a[data-tab="produce"]') is None
    browser.find('#records-panel tr[data-offset="0"]')  # read as any topic
    browser.screenshot("reserved-topic")
