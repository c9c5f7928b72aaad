"""The gateway's own credentials to Kafka, against the listeners of a real Apache Kafka broker.

The session's broker signs clients in on SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, for
the users made at format time), speaks TLS on SSL with a certificate of a test CA, and on MTLS
also wants a client certificate of that CA. Round trips (admin, produce, fetch) prove every way
in works, from a ``KafkaLog`` and from a whole gateway over HTTP; refusals prove the gateway
checks what it must (the broker's certificate) and says at once, in one line naming how it
signed in and never the secret, when the broker will not have it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.admin import TopicAdmin
from service.adapters.kafka.cluster import ClusterClient
from service.adapters.kafka.producer import RecordAppender
from service.adapters.kafka.security import KafkaSecurity, client_options
from service.core.models import TopicPartition
from service.errors import BackendUnavailable
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import kafka_settings, running_gateway
from tests.helpers import V2, commit, consumer, create_topic, poll_until, produce, serve_until_exit, subscribe

from .helpers import options, read_all, values

WRONG = "not-the-password"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
WAYS_IN = (*(f"SASL_PLAINTEXT {m}" for m in SASL_MECHANISMS), "SSL", "MTLS")


def user(broker: KafkaBroker) -> tuple[str, str]:
    """A user the broker's SASL listener knows, and its password."""
    return next(iter(broker.users.items()))


def sasl(broker: KafkaBroker, mechanism: str, password: str | None = None) -> KafkaSecurity:
    if mechanism == "OAUTHBEARER":
        return KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth_token="a-token")
    name, known = user(broker)
    return KafkaSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,  # type: ignore[arg-type]
        username=name,
        password=known if password is None else password,
    )


@dataclass(frozen=True)
class WayIn:
    """One listener of the broker and how the gateway signs in to it, as the log's options and as
    the gateway's settings."""

    bootstrap: str
    security: KafkaSecurity

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def settings(self) -> dict[str, object]:
        s = self.security
        given = {
            "kafka_security_protocol": s.protocol,
            "kafka_sasl_mechanism": s.sasl_mechanism,
            "kafka_sasl_username": s.username,
            "kafka_sasl_password": s.password,
            "kafka_ssl_cafile": s.ssl_cafile,
            "kafka_ssl_certfile": s.ssl_certfile,
            "kafka_ssl_keyfile": s.ssl_keyfile,
        }
        return {"log": self.url, **{k: v for k, v in given.items() if v is not None}}


def way_in(broker: KafkaBroker, name: str) -> WayIn:
    if name.startswith("SASL_PLAINTEXT "):
        return WayIn(broker.sasl_bootstrap, sasl(broker, name.split()[1]))
    if name == "SSL":
        return WayIn(broker.ssl_bootstrap, KafkaSecurity(protocol="SSL", ssl_cafile=broker.tls.ca))
    cert, key = broker.client_certificate("brokergate-gateway")
    security = KafkaSecurity(protocol="SSL", ssl_cafile=broker.tls.ca, ssl_certfile=cert, ssl_keyfile=key)
    return WayIn(broker.mtls_bootstrap, security)


@pytest.mark.parametrize("name", WAYS_IN)
async def test_a_kafka_log_round_trip(kafka_broker: KafkaBroker, name: str, topic: str) -> None:
    """Every client of the log (admin, producer, fetches and metadata) works over the listener:
    a topic is made, described, written, read back and deleted through it alone."""
    way = way_in(kafka_broker, name)
    async with KafkaLog(way.url, options(security=way.security)) as log:
        info = await log.create_topic(topic, 2, 1, {"retention.ms": "3600000"})
        assert len(info.partitions) == 2
        described = await log.describe_topic(topic)
        assert described.configs["retention.ms"] == "3600000"
        # the broker advertises the listener the log came in on, so every connection uses it
        assert [f"{b.host}:{b.port}" for b in await log.brokers()] == [way.bootstrap]
        tp = TopicPartition(topic, 1)
        assert list(await log.append(tp, values(3))) == [0, 1, 2]
        assert [r.value for r in await read_all(log, tp)] == [b"v0", b"v1", b"v2"]
        assert await log.offsets(tp) == (0, 3)
        await log.delete_topic(topic)
        assert topic not in await log.list_topics()


@pytest.mark.parametrize("name", WAYS_IN)
async def test_a_gateway_round_trip(kafka_broker: KafkaBroker, name: str, tmp_path: Path, topic: str) -> None:
    """A whole gateway on the listener, from its settings: topics created and described, records
    produced and consumed by a consumer group over HTTP, the group's offsets committed."""
    way = way_in(kafka_broker, name)
    settings = {**kafka_settings(kafka_broker), **way.settings()}
    async with running_gateway(tmp_path, **settings) as gw:
        await create_topic(gw.client, topic, partitions=2)
        described = await gw.client.get(f"/topics/{topic}")
        assert described.status_code == 200, described.text
        assert len(described.json()["partitions"]) == 2
        sent = await produce(gw.client, topic, [{"value": f"r{i}", "partition": i % 2} for i in range(6)])
        assert sorted((o["partition"], o["offset"]) for o in sent) == [
            (p, o) for p in (0, 1) for o in range(3)
        ]
        base = await consumer(gw.client, f"{topic}-group")
        await subscribe(gw.client, base, topic)
        got = await poll_until(gw.client, base, 6)
        assert sorted(r["value"] for r in got) == [f"r{i}" for i in range(6)]
        await commit(gw.client, base)
        committed = await gw.client.request(
            "GET",
            f"{base}/offsets",
            json={"partitions": [{"topic": topic, "partition": p} for p in (0, 1)]},
            headers={"Content-Type": V2},
        )
        assert committed.status_code == 200, committed.text
        assert sorted((o["partition"], o["offset"]) for o in committed.json()["offsets"]) == [(0, 3), (1, 3)]


async def test_the_broker_certificate_is_checked(kafka_broker: KafkaBroker) -> None:
    """Without the CA that signed the broker's certificate, the gateway does not trust it: TLS
    is verified, not merely encrypted."""
    log = KafkaLog(f"kafka://{kafka_broker.ssl_bootstrap}", options(security=KafkaSecurity(protocol="SSL")))
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    assert str(caught.value) == (
        f"The Kafka cluster at {kafka_broker.ssl_bootstrap} failed the TLS handshake (SSL): "
        "unable to get local issuer certificate"
    )


async def test_mutual_tls_without_a_client_certificate_is_refused_clearly(kafka_broker: KafkaBroker) -> None:
    """The MTLS listener wants a client certificate: a gateway without one is refused at start, and
    the message says that the brokers refused its certificate (not that the connection closed)."""
    security = KafkaSecurity(protocol="SSL", ssl_cafile=kafka_broker.tls.ca)
    log = KafkaLog(f"kafka://{kafka_broker.mtls_bootstrap}", options(security=security))
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    assert time.monotonic() - started < 2.5
    message = str(caught.value)
    assert message.startswith(
        f"The Kafka cluster at {kafka_broker.mtls_bootstrap} failed the TLS handshake (SSL): "
    )
    assert "alert" in message and "certificate" in message and "kafka_ssl_certfile" in message
    assert "\n" not in message


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
async def test_a_wrong_password_stops_the_start_at_once(kafka_broker: KafkaBroker, mechanism: str) -> None:
    """Kafka's refusal is an answer: the start fails at once (not after the request timeout), in
    one line naming the mechanism and the user, never the password."""
    name, _ = user(kafka_broker)
    log = KafkaLog(
        f"kafka://{kafka_broker.sasl_bootstrap}", options(security=sasl(kafka_broker, mechanism, WRONG))
    )
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    assert time.monotonic() - started < 2.5  # not the 5 s request timeout
    message = str(caught.value)
    assert message.startswith(
        f"The Kafka cluster at {kafka_broker.sasl_bootstrap} refused the gateway's credentials "
        f"(SASL_PLAINTEXT, {mechanism} as {name!r}): "
    )
    assert "SaslAuthenticationFailed" in message
    assert WRONG not in message and "\n" not in message


async def test_a_mechanism_the_broker_does_not_offer_is_named(kafka_broker: KafkaBroker) -> None:
    # The listener offers PLAIN and SCRAM, not OAUTHBEARER: Kafka answers UnsupportedSaslMechanism.
    log = KafkaLog(
        f"kafka://{kafka_broker.sasl_bootstrap}", options(security=sasl(kafka_broker, "OAUTHBEARER"))
    )
    with pytest.raises(BackendUnavailable) as caught:
        await log.start()
    message = str(caught.value)
    assert message.startswith(
        f"The Kafka cluster at {kafka_broker.sasl_bootstrap} refused the gateway's credentials "
        "(SASL_PLAINTEXT, OAUTHBEARER): "
    )
    assert "UnsupportedSaslMechanism" in message and "a-token" not in message


@pytest.mark.parametrize("client", ["fetches and metadata", "admin", "producer"])
async def test_every_client_of_the_log_signs_in(kafka_broker: KafkaBroker, client: str) -> None:
    """Each of the log's aiokafka clients alone signs in with the gateway's credentials: it starts
    on the SASL listener with the right password (the producer gets its producer id there too)
    and is refused with a wrong one, where a client without them could not start at all."""

    def build(password: str | None) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
        shared = client_options(sasl(kafka_broker, "SCRAM-SHA-256", password))
        servers = [kafka_broker.sasl_bootstrap]
        if client == "admin":
            admin = TopicAdmin(servers, client_id="t", request_timeout_ms=5000, security=shared)
            return admin.start, admin.close
        if client == "producer":
            appender = RecordAppender(servers, options(), security=shared)
            return appender.start, appender.stop
        cluster = ClusterClient(servers, client_id="t", connection_timeout_ms=5000, security=shared)
        return cluster.start, cluster.close

    start, stop = build(None)
    try:
        await asyncio.wait_for(start(), 5)
    finally:
        await stop()
    start, stop = build(WRONG)
    try:
        with pytest.raises(Exception) as refused:
            await asyncio.wait_for(start(), 5)
    finally:
        await stop()
    assert not isinstance(refused.value, TimeoutError)  # refused, not left waiting


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
async def test_a_gateway_with_a_wrong_password_does_not_start(
    kafka_broker: KafkaBroker, mechanism: str, tmp_path: Path
) -> None:
    """The gateway's lifespan fails with the log's one-line refusal: no app serving without its log."""
    settings = {
        **kafka_settings(kafka_broker),
        **WayIn(kafka_broker.sasl_bootstrap, sasl(kafka_broker, mechanism, WRONG)).settings(),
    }
    app = create_app(Settings(data_dir=tmp_path / "data", **settings))  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(
        BackendUnavailable, match=f"refused the gateway's credentials \\(SASL_PLAINTEXT, {mechanism} "
    ):
        async with app.router.lifespan_context(app):
            pytest.fail("the gateway started with a wrong password")
    assert time.monotonic() - started < 2.5


async def test_serve_takes_kafka_credentials_from_the_environment(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """``brokergate serve`` as a container runs it: the password from a file, a refusal ends the
    process with exit code 3 and one line, no traceback, no secret."""
    name, _ = user(kafka_broker)
    password_file = tmp_path / "kafka-password"
    password_file.write_text(WRONG + "\n")
    result = await asyncio.to_thread(
        serve_until_exit,
        tmp_path,
        {
            "BROKERGATE_LOG": f"kafka://{kafka_broker.sasl_bootstrap}",
            "BROKERGATE_KAFKA_REQUEST_TIMEOUT_MS": "5000",
            "BROKERGATE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "BROKERGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BROKERGATE_KAFKA_SASL_USERNAME": name,
            "BROKERGATE_KAFKA_SASL_PASSWORD_FILE": str(password_file),
        },
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and WRONG not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert (
        f"brokergate: cannot start: The Kafka cluster at {kafka_broker.sasl_bootstrap} refused the gateway's "
        f"credentials (SASL_PLAINTEXT, SCRAM-SHA-512 as {name!r}): "
    ) in line
