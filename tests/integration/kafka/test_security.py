"""The gateway's own credentials to Kafka, against a real broker that asks for them.

Tansu started with ``--authentication`` wants SASL before anything else and offers SCRAM;
having no users, it refuses every credential. So the refusals are proven here for real
(at once, in one line naming the identity, never the secret, from the settings a container
would set); the round trips over SASL and over TLS are strict xfails, since Tansu 0.6 has
no way to add a SCRAM user and its TLS listener does not handshake. They start failing
loudly the day the broker can.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from service.adapters.kafka import KafkaLog
from service.adapters.kafka.admin import TopicAdmin
from service.adapters.kafka.cluster import ClusterClient
from service.adapters.kafka.errors import start_failure
from service.adapters.kafka.producer import RecordAppender
from service.adapters.kafka.security import KafkaSecurity, client_options
from service.core.models import TopicPartition
from service.errors import BackendUnavailable
from tests.helpers import serve_until_exit

from .helpers import BROKER_LACKS_IT, SecuredTansu, authenticating_broker, options, read_all, values

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def authenticating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredTansu]:
    with authenticating_broker(tmp_path_factory.mktemp("tansu-sasl")) as broker:
        yield broker


def sasl(mechanism: str) -> KafkaSecurity:
    if mechanism == "OAUTHBEARER":
        return KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth_token="a-token")
    return KafkaSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,  # type: ignore[arg-type]
        username=USER,
        password=PASSWORD,
    )


@pytest.mark.parametrize(
    ("mechanism", "identity"),
    [
        ("SCRAM-SHA-256", f"SASL_PLAINTEXT, SCRAM-SHA-256 as {USER!r}"),
        ("SCRAM-SHA-512", f"SASL_PLAINTEXT, SCRAM-SHA-512 as {USER!r}"),
        ("OAUTHBEARER", "SASL_PLAINTEXT, OAUTHBEARER"),
    ],
)
async def test_refused_credentials_stop_the_start_at_once(
    authenticating: SecuredTansu, mechanism: str, identity: str
) -> None:
    log = KafkaLog(authenticating.url, options(security=sasl(mechanism)))
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    assert time.monotonic() - started < 2.5  # not the 5 s request timeout: a refusal is an answer
    message = str(caught.value)
    assert message.startswith(
        f"The Kafka cluster at {authenticating.bootstrap} refused the gateway's credentials ({identity})"
    )
    assert PASSWORD not in message and "a-token" not in message and "\n" not in message


@pytest.mark.parametrize("client", ["fetches and metadata", "admin", "producer"])
async def test_every_client_of_the_log_signs_in(authenticating: SecuredTansu, client: str) -> None:
    # Each of the log's aiokafka clients alone: each must try SCRAM with the gateway's user (and be
    # refused, having no user to be), where one without the options would not even try SASL.
    security = sasl("SCRAM-SHA-256")
    shared, servers = client_options(security), [authenticating.bootstrap]
    if client == "admin":
        admin = TopicAdmin(servers, client_id="t", request_timeout_ms=5000, security=shared)
        start, stop = admin.start, admin.close
    elif client == "producer":
        appender = RecordAppender(servers, options(), security=shared)
        start, stop = appender.start, appender.stop
    else:
        cluster = ClusterClient(servers, client_id="t", connection_timeout_ms=5000, security=shared)
        start, stop = cluster.start, cluster.close
    try:
        with pytest.raises(Exception) as caught:
            await asyncio.wait_for(start(), 5)
    finally:
        await stop()
    error = start_failure(
        caught.value,
        authenticating.bootstrap,
        idempotence=False,
        timeout_ms=5000,
        security=security.describe(),
    )
    assert str(error) == (
        f"The Kafka cluster at {authenticating.bootstrap} refused the gateway's credentials "
        f"(SASL_PLAINTEXT, SCRAM-SHA-256 as {USER!r})"
    )


async def test_a_mechanism_the_broker_does_not_offer_is_named(authenticating: SecuredTansu) -> None:
    # Tansu offers SCRAM only, and answers PLAIN by closing the connection (Kafka would answer
    # UnsupportedSaslMechanism): the message still says how the gateway tried to sign in.
    log = KafkaLog(authenticating.url, options(security=sasl("PLAIN")))
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    assert str(caught.value).startswith(
        f"Cannot reach the Kafka cluster at {authenticating.bootstrap} (SASL_PLAINTEXT, PLAIN as {USER!r}): "
        "KafkaConnectionError"
    )


async def test_serve_takes_kafka_credentials_from_the_environment(
    authenticating: SecuredTansu, tmp_path: Path
) -> None:
    password_file = tmp_path / "kafka-password"
    password_file.write_text(PASSWORD + "\n")
    result = await asyncio.to_thread(
        serve_until_exit,
        tmp_path,
        {
            "BROKERGATE_LOG": authenticating.url,
            "BROKERGATE_KAFKA_IDEMPOTENCE": "false",
            "BROKERGATE_KAFKA_REQUEST_TIMEOUT_MS": "5000",
            "BROKERGATE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "BROKERGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BROKERGATE_KAFKA_SASL_USERNAME": USER,
            "BROKERGATE_KAFKA_SASL_PASSWORD_FILE": str(password_file),
        },
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and PASSWORD not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert line.endswith(
        f"brokergate: cannot start: The Kafka cluster at {authenticating.bootstrap} refused the gateway's "
        f"credentials (SASL_PLAINTEXT, SCRAM-SHA-512 as {USER!r})"
    )


async def _round_trip(log: KafkaLog, topic: str) -> None:
    await log.start()
    try:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        assert list(await log.append(tp, values(3))) == [0, 1, 2]
        assert [r.value for r in await read_all(log, tp)] == [b"v0", b"v1", b"v2"]
    finally:
        await log.stop()


@pytest.mark.xfail(strict=True, reason=f"{BROKER_LACKS_IT}: SASL users (Tansu 0.6 cannot add a SCRAM user)")
async def test_a_round_trip_over_sasl_scram(authenticating: SecuredTansu, topic: str) -> None:
    await _round_trip(KafkaLog(authenticating.url, options(security=sasl("SCRAM-SHA-256"))), topic)


@pytest.mark.xfail(
    strict=True, reason=f"{BROKER_LACKS_IT}: TLS (Tansu 0.6's tls:// listener does not handshake)"
)
async def test_a_round_trip_over_tls_with_a_client_certificate(tmp_path: Path, topic: str) -> None:
    ca = trustme.CA()
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("brokergate")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "broker.pem"))
    client.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "gateway.pem"))
    broker = SecuredTansu(tmp_path / "tansu", ["--cert", str(tmp_path / "broker.pem")], scheme="tls")
    broker.start()
    try:
        security = KafkaSecurity(
            protocol="SSL", ssl_cafile=tmp_path / "ca.pem", ssl_certfile=tmp_path / "gateway.pem"
        )
        await _round_trip(KafkaLog(broker.url, options(security=security, request_timeout_ms=2000)), topic)
    finally:
        broker.stop(timeout=0.5)  # it waits 5 s for the stalled handshake to drain otherwise
