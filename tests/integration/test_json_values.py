"""A JSON value is kept exactly: what a producer sent is, to the digit and key, what a consumer reads."""

from __future__ import annotations

import json

from tests.helpers import JSON, consumer, create_topic, poll_until, subscribe

# Numbers a double cannot hold, a decimal's trailing zero, and keys out of alphabetical order.
VALUE = (
    b'{"z":1,"big":123456789012345678901234567890,"pi":3.14159265358979323846264338327950288,'
    b'"price":1.10,"tiny":-1e-400,"list":[18446744073709551616,0.1,{"b":2,"a":1}]}'
)


async def test_json_values_keep_their_numbers_and_key_order(client, name):
    await create_topic(client, name, 1)
    body = b'{"records":[{"key":{"id":99999999999999999999},"value":' + VALUE + b"}]}"
    r = await client.post(f"/topics/{name}", content=body, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text

    # a stateless read and a consumer instance both give the text back as it was sent
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 0}, headers={"Accept": JSON}
    )
    assert r.status_code == 200, r.text
    assert VALUE in r.content and b'"key":{"id":99999999999999999999}' in r.content
    base = await consumer(client, f"g-{name}", fmt="json")
    await subscribe(client, base, name)
    [record] = await poll_until(client, base, 1, fmt=JSON)
    assert list(record["value"]) == ["z", "big", "pi", "price", "tiny", "list"]
    assert record["value"]["big"] == 123456789012345678901234567890  # json parses big ints exactly
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 0}, headers={"Accept": JSON}
    )
    assert (
        json.loads(r.content, parse_float=str)["records"][0]["value"]["pi"]
        == "3.14159265358979323846264338327950288"
    )


async def test_plain_json_values_are_unchanged(client, name):
    await create_topic(client, name, 1)
    body = b'{"records":[{"value":{"n":42,"s":"caf\\u00e9","ok":true,"none":null}}]}'
    r = await client.post(f"/topics/{name}", content=body, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 0}, headers={"Accept": JSON}
    )
    assert r.json()["records"][0]["value"] == {"n": 42, "s": "café", "ok": True, "none": None}
