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
    # CreateAclRequest under rest-utils' Jackson: a name no enum constant has, a value of the wrong
    # type and a field left out (its AutoValue builder throws) are 400/400; a name the class does
    # not have 422/422; a principal the gateway cannot read a constraint, 422/422; what Kafka
    # refuses of a binding that binds, 42206; every error typed application/json, as v3's answers.
    for bad, status, code in (
        ({**ALICE, "principal": "alice"}, 422, 422),  # not User:...
        ({**ALICE, "operation": "FLY"}, 400, 400),
        ({**ALICE, "resource_type": "TRANSACTIONAL_ID"}, 400, 400),
        ({**ALICE, "permission": ["ALLOW"]}, 400, 400),
        ({**ALICE, "resource_name": "bad/topic"}, 422, 42206),
        ({**ALICE, "resource_type": "CLUSTER", "resource_name": "mine"}, 422, 42206),
        ({**ALICE, "extra": 1}, 422, 422),
        ({k: v for k, v in ALICE.items() if k != "permission"}, 400, 400),
    ):
        r = await client.post(url, json=bad)
        assert (r.status_code, r.json()["error_code"]) == (status, code), (bad, r.text)
        assert r.headers["content-type"] == "application/json", r.headers
    r = await client.post(url, content=b"{", headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error_code"]) == (400, 400), r.text
    r = await client.post(url, json={**ALICE, "extra": 1})
    assert r.json()["message"] == "Unrecognized field: extra"
    r = await client.delete(url)  # no resource_type: would delete everything
    assert r.status_code == 422 and "resource_type" in r.json()["message"]
    r = await client.get(url, params={"operation": "FLY"})
    assert r.status_code == 422
    assert (await client.get("/v3/clusters/nope/acls")).status_code == 404
    assert (await client.get(url)).json()["data"] == []
