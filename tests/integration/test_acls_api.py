"""Confluent's v3 ACL API: create, list with filters, delete, and what is refused."""

from __future__ import annotations

from tests.helpers import cluster_id

ALICE = {
    "resource_type": "TOPIC",
    "resource_name": "orders",
    "pattern_type": "LITERAL",
    "principal": "User:alice",
    "host": "*",
    "operation": "READ",
    "permission": "ALLOW",
}
TEAM = {**ALICE, "resource_name": "team-a.", "pattern_type": "PREFIXED", "operation": "ALL"}
DENY = {**ALICE, "principal": "User:bob", "permission": "DENY", "host": "10.0.0.1"}
GROUP = {**ALICE, "resource_type": "GROUP", "resource_name": "g", "operation": "READ"}


async def test_create_list_filter_delete(client):
    cid = await cluster_id(client)
    url = f"/v3/clusters/{cid}/acls"
    for body in (ALICE, TEAM, DENY, GROUP, ALICE):  # the second ALICE changes nothing
        r = await client.post(url, json=body)
        assert r.status_code == 201, r.text
    r = await client.get(url)
    assert r.status_code == 200 and r.json()["kind"] == "KafkaAclList"
    data = r.json()["data"]
    assert len(data) == 4 and all(d["kind"] == "KafkaAcl" and d["cluster_id"] == cid for d in data)
    listed = [{k: d[k] for k in ALICE} for d in data]
    assert sorted(listed, key=repr) == sorted([ALICE, TEAM, DENY, GROUP], key=repr)

    async def selected(**params: str) -> int:
        r = await client.get(url, params=params)
        assert r.status_code == 200, r.text
        return len(r.json()["data"])

    assert await selected(principal="User:alice") == 3
    assert await selected(resource_type="TOPIC") == 3
    assert await selected(resource_type="TOPIC", pattern_type="PREFIXED") == 1
    assert await selected(resource_type="TOPIC", resource_name="team-a.events", pattern_type="MATCH") == 1
    assert await selected(resource_type="TOPIC", resource_name="orders", pattern_type="MATCH") == 2
    assert await selected(permission="DENY", host="10.0.0.1") == 1
    assert await selected(operation="ALL") == 1

    r = await client.delete(url, params={"resource_type": "TOPIC", "principal": "User:alice"})
    assert r.status_code == 200, r.text
    assert sorted(({k: d[k] for k in ALICE} for d in r.json()["data"]), key=repr) == sorted(
        [ALICE, TEAM], key=repr
    )
    assert await selected() == 2


async def test_bad_bindings_and_filters_are_refused(client):
    cid = await cluster_id(client)
    url = f"/v3/clusters/{cid}/acls"
    for bad in (
        {**ALICE, "principal": "alice"},  # not User:...
        {**ALICE, "operation": "FLY"},
        {**ALICE, "resource_type": "TRANSACTIONAL_ID"},
        {**ALICE, "resource_name": "bad/topic"},
        {**ALICE, "resource_type": "CLUSTER", "resource_name": "mine"},
        {**ALICE, "extra": 1},
        {k: v for k, v in ALICE.items() if k != "permission"},
    ):
        r = await client.post(url, json=bad)
        assert r.status_code == 422 and r.json()["error_code"] in (42206,), (bad, r.text)
    r = await client.delete(url)  # no resource_type: would delete everything
    assert r.status_code == 422 and "resource_type" in r.json()["message"]
    r = await client.get(url, params={"operation": "FLY"})
    assert r.status_code == 422
    assert (await client.get("/v3/clusters/nope/acls")).status_code == 404
    assert (await client.get(url)).json()["data"] == []
