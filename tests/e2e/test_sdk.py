"""A Python client generated from openapi.yaml at test time works against a running gateway."""

from __future__ import annotations

import base64
import importlib
import subprocess
import sys
from pathlib import Path

from tests.e2e.gateway_process import GatewayProcess

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


def test_generated_client_drives_the_gateway(tmp_path):
    generate(tmp_path)
    sys.path.insert(0, str(tmp_path))
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
        sys.path.remove(str(tmp_path))
