"""A Python client generated from openapi.yaml at test time works against a running gateway."""

from __future__ import annotations

import base64
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.security.users import add_user
from tests.e2e.gateway_process import GatewayProcess
from tests.oidc import IdentityProvider

ROOT = Path(__file__).resolve().parents[2]


def generate(out: Path) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "openapi-python-client"),
            "generate",
            "--path",
            str(ROOT / "openapi.yaml"),
            "--meta",
            "none",
            "--output-path",
            str(out / "brokergate_sdk"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "brokergate_sdk" / "api" / "topics" / "produce_to_topic.py").exists()


@pytest.fixture(scope="module")
def sdk_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The client, generated once for the module and importable as ``brokergate_sdk``."""
    out = tmp_path_factory.mktemp("sdk")
    generate(out)
    sys.path.insert(0, str(out))
    yield out
    sys.path.remove(str(out))


def test_generated_client_drives_the_gateway(tmp_path, sdk_dir):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        sdk = importlib.import_module("brokergate_sdk")
        models = importlib.import_module("brokergate_sdk.models")
        create_topic = importlib.import_module("brokergate_sdk.api.v3.create_topic")
        list_clusters = importlib.import_module("brokergate_sdk.api.v3.list_clusters")
        produce_to_topic = importlib.import_module("brokergate_sdk.api.topics.produce_to_topic")
        create_consumer = importlib.import_module("brokergate_sdk.api.consumers.create_consumer")
        subscribe = importlib.import_module("brokergate_sdk.api.consumers.subscribe")
        poll_records = importlib.import_module("brokergate_sdk.api.consumers.poll_records")
        commit_offsets = importlib.import_module("brokergate_sdk.api.consumers.commit_offsets")
        get_lags = importlib.import_module("brokergate_sdk.api.v3.get_consumer_group_lags")

        client = sdk.Client(base_url=gw.url)
        cluster = list_clusters.sync(client=client).data[0].cluster_id
        topic = create_topic.sync(
            cluster,
            client=client,
            body=models.CreateTopicRequest(topic_name="sdk-orders", partitions_count=2),
        )
        assert topic.partitions_count == 2

        produced = produce_to_topic.sync(
            "sdk-orders",
            client=client,
            body=models.JsonProduceRequest(
                records=[models.JsonRecord(key=f"k{i}", value=i) for i in range(6)]
            ),
        )
        assert [o.error_code for o in produced.offsets] == [None] * 6
        binary = produce_to_topic.sync(
            "sdk-orders",
            client=client,
            body=models.BinaryProduceRequest(
                records=[models.BinaryRecord(value=base64.b64encode(b"raw").decode(), partition=0)]
            ),
        )
        assert binary.offsets[0].partition == 0

        consumer = create_consumer.sync(
            "sdk-group",
            client=client,
            body=models.CreateConsumerRequest(
                name="sdk-1", format_=models.CreateConsumerRequestFormat.BINARY, auto_offset_reset="earliest"
            ),
        )
        assert consumer.instance_id == "sdk-1"
        response = subscribe.sync_detailed(
            "sdk-group", "sdk-1", client=client, body=models.SubscriptionRequest(topics=["sdk-orders"])
        )
        assert response.status_code == 204

        seen: list = []
        for _ in range(20):
            seen += poll_records.sync("sdk-group", "sdk-1", client=client, timeout=500) or []
            if len(seen) >= 7:
                break
        assert len(seen) == 7
        assert b"raw" in {base64.b64decode(r.value) for r in seen}
        committed = commit_offsets.sync("sdk-group", "sdk-1", client=client)
        assert sum(o.offset for o in committed) == 7
        lags = get_lags.sync(cluster, "sdk-group", client=client)
        assert [row.lag for row in lags.data] == [0, 0]
    finally:
        gw.stop()


def test_generated_client_sends_the_credentials_the_document_declares(tmp_path, sdk_dir):
    users = tmp_path / "users"
    for name in ("admin", "alice", "bob"):
        add_user(users, name, f"{name}-pw")
    idp = IdentityProvider().__enter__()
    idp.add_key("k1")
    env = {
        "BROKERGATE_AUTHORIZE": "true",
        "BROKERGATE_SUPER_USERS": "User:admin",
        "BROKERGATE_JWT_ISSUER": idp.issuer,
        "BROKERGATE_JWT_AUDIENCE": idp.audience,
    }
    gw = GatewayProcess(tmp_path / "data", "--auth", "basic,jwt", "--users-file", str(users), env=env).start()
    try:
        sdk = importlib.import_module("brokergate_sdk")
        models = importlib.import_module("brokergate_sdk.models")
        list_clusters = importlib.import_module("brokergate_sdk.api.v3.list_clusters")
        create_topic = importlib.import_module("brokergate_sdk.api.v3.create_topic")
        create_acls = importlib.import_module("brokergate_sdk.api.acls.create_acls")
        produce_to_topic = importlib.import_module("brokergate_sdk.api.topics.produce_to_topic")
        health = importlib.import_module("brokergate_sdk.api.ops.health")

        def basic(name: str) -> Any:
            token = base64.b64encode(f"{name}:{name}-pw".encode()).decode()
            return sdk.AuthenticatedClient(base_url=gw.url, token=token, prefix="Basic")

        anonymous = sdk.Client(base_url=gw.url)
        assert list_clusters.sync_detailed(client=anonymous).status_code == 401
        assert health.sync_detailed(client=anonymous).status_code == 200  # declared open

        admin = basic("admin")
        cluster = list_clusters.sync(client=admin).data[0].cluster_id
        create_topic.sync(cluster, client=admin, body=models.CreateTopicRequest(topic_name="team-a.orders"))
        grant = models.CreateAclRequest(
            resource_type=models.CreateAclRequestResourceType.TOPIC,
            resource_name="team-a.",
            pattern_type=models.CreateAclRequestPatternType.PREFIXED,
            principal="User:alice",
            host="*",
            operation=models.CreateAclRequestOperation.WRITE,
            permission=models.CreateAclRequestPermission.ALLOW,
        )
        assert create_acls.sync_detailed(cluster, client=admin, body=grant).status_code == 201

        body = models.JsonProduceRequest(records=[models.JsonRecord(value=1)])
        produced = produce_to_topic.sync_detailed("team-a.orders", client=basic("alice"), body=body)
        assert produced.status_code == 200, produced.content
        refused = produce_to_topic.sync_detailed("team-a.orders", client=basic("bob"), body=body)
        assert refused.status_code == 403, refused.content

        def bearer(name: str) -> Any:  # the SDK's default: "Authorization: Bearer <token>"
            return sdk.AuthenticatedClient(base_url=gw.url, token=idp.token(name))

        produced = produce_to_topic.sync_detailed("team-a.orders", client=bearer("alice"), body=body)
        assert produced.status_code == 200, produced.content
        refused = produce_to_topic.sync_detailed("team-a.orders", client=bearer("bob"), body=body)
        assert refused.status_code == 403, refused.content
    finally:
        gw.stop()
        idp.__exit__()
