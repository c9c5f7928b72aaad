"""A JSON value is kept exactly: what a producer sent is, to the digit and key, what a consumer reads."""

from __future__ import annotations

import json

from tests.helpers import BINARY, JSON, consumer, create_topic, poll_until, subscribe

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


async def test_a_json_answer_embeds_each_value_as_stored_and_never_one_that_is_not_json(client, name):
    await create_topic(client, name, 1)
    records = [
        {
            "key": "cl\u00e9",
            "value": {"s": '\u2603 "quoted"', "n": None},
            "headers": [{"name": 'h"\u00e9', "value": "YQ=="}],
        },
        {"value": None},
        {"key": [1, {"a": None}], "value": 18446744073709551616},
    ]
    r = await client.post(f"/topics/{name}", json={"records": records}, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    r = await client.post(
        f"/topics/{name}", content=b'{"records":[{"value":' + VALUE + b"}]}", headers={"Content-Type": JSON}
    )
    assert r.status_code == 200, r.text
    base = await consumer(client, f"g-{name}", fmt="json")
    await subscribe(client, base, name)
    got = await poll_until(client, base, 4, fmt=JSON)
    assert [(g["key"], g["value"], g["headers"]) for g in got[:3]] == [
        ("cl\u00e9", {"s": '\u2603 "quoted"', "n": None}, [{"name": 'h"\u00e9', "value": "YQ=="}]),
        (None, None, []),
        ([1, {"a": None}], 18446744073709551616, []),
    ]
    assert [(g["topic"], g["partition"], g["offset"]) for g in got] == [(name, 0, n) for n in range(4)]

    # A value produced in another format that is not JSON is never embedded: the poll is refused.
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": "e25vdCBqc29u"}]}, headers={"Content-Type": BINARY}
    )
    assert r.status_code == 200, r.text
    r = await client.get(f"{base}/records", params={"timeout": 2000}, headers={"Accept": JSON})
    assert (r.status_code, r.json()["error_code"]) == (422, 42203), r.text
    assert "not valid JSON" in r.json()["message"]
