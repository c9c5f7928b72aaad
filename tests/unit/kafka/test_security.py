"""The Kafka log's credentials: what every aiokafka client is given, and what is refused at start.

No broker needed: ``client_options`` is what the log hands its producer, fetch client and
admin client; the combination checks and the start-failure wording are pure.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest
import trustme
from aiokafka import errors as ke
from aiokafka.abc import AbstractTokenProvider
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from service.adapters.kafka import KafkaLog
from service.adapters.kafka.errors import start_failure
from service.adapters.kafka.options import KafkaOptions
from service.adapters.kafka.security import FileToken, KafkaSecurity, StaticToken, client_options
from service.server.backends import BackendNotAvailable, build_log, kafka_options
from service.settings import Settings

SERVERS = "k1:9092"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path]:
    ca = trustme.CA()
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return ca, path


def test_plaintext_gives_the_clients_nothing_new() -> None:
    assert KafkaOptions().security == KafkaSecurity()
    assert client_options(KafkaSecurity()) == {}
    assert kafka_options(Settings()).security.protocol == "PLAINTEXT"


def test_sasl_ssl_with_scram(ca: tuple[trustme.CA, Path]) -> None:
    authority, cafile = ca
    security = KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username="gw", password="pw", ssl_cafile=cafile
    )
    options = client_options(security)
    assert {k: v for k, v in options.items() if k != "ssl_context"} == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "gw",
        "sasl_plain_password": "pw",
    }
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    serial = x509.load_pem_x509_certificate(authority.cert_pem.bytes()).serial_number
    assert [int(cert["serialNumber"], 16) for cert in context.get_ca_certs()] == [serial]  # the CA file's
    assert "pw" not in repr(security) and "pw" not in repr(KafkaOptions(security=security))
    assert security.describe() == "SASL_SSL, SCRAM-SHA-512 as 'gw'"


def test_the_context_verifies_a_broker_certificate_of_the_ca(
    ca: tuple[trustme.CA, Path], tmp_path: Path
) -> None:
    authority, cafile = ca
    server = authority.issue_cert("broker.example")
    context = client_options(KafkaSecurity(protocol="SSL", ssl_cafile=cafile))["ssl_context"]
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.configure_cert(server_context)
    # A TLS handshake in memory: the client accepts the CA's certificate for its name only.
    for hostname, accepted in (("broker.example", True), ("other.example", False)):
        assert _handshake(context, server_context, hostname) is accepted


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, hostname: str) -> bool:
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        done = 0
        for side in (c, s):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
            except ssl.SSLError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == 2:
            return True
    return False


def test_a_client_certificate_and_an_encrypted_key(ca: tuple[trustme.CA, Path], tmp_path: Path) -> None:
    authority, cafile = ca
    client = authority.issue_cert("gateway")
    cert = tmp_path / "gateway.pem"
    client.cert_chain_pems[0].write_to_path(str(cert))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
    encrypted = tmp_path / "gateway.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-pw"),
        )
    )
    ok = KafkaSecurity(
        protocol="SSL", ssl_cafile=cafile, ssl_certfile=cert, ssl_keyfile=encrypted, ssl_key_password="key-pw"
    )
    assert isinstance(client_options(ok)["ssl_context"], ssl.SSLContext)
    for password in (None, "wrong"):
        bad = KafkaSecurity(
            protocol="SSL",
            ssl_cafile=cafile,
            ssl_certfile=cert,
            ssl_keyfile=encrypted,
            ssl_key_password=password,
        )
        with pytest.raises(ValueError, match="kafka_ssl_certfile: cannot load") as caught:
            client_options(bad)  # never a prompt on the terminal
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"kafka_ssl_cafile: cannot load CA certificates .*No such file"):
        client_options(KafkaSecurity(protocol="SSL", ssl_cafile=tmp_path / "missing.pem"))


def test_oauthbearer_static_token() -> None:
    options = client_options(
        KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", oauth_token="t0k")
    )
    provider = options["sasl_oauth_token_provider"]
    assert isinstance(provider, StaticToken) and isinstance(provider, AbstractTokenProvider)
    assert "t0k" not in repr(provider)
    assert options["security_protocol"] == "SASL_SSL" and options["sasl_mechanism"] == "OAUTHBEARER"
    assert "sasl_plain_password" not in options


async def test_oauthbearer_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first-token\n")
    security = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth_token_file=path)
    provider = client_options(security)["sasl_oauth_token_provider"]
    assert isinstance(provider, FileToken)
    assert await provider.token() == "first-token"

    path.write_text("second\n")  # rewritten in place
    assert await provider.token() == "second"

    # replaced by a rename, as Kubernetes and token sidecars do: same size, same mtime
    stat = path.stat()
    fresh = tmp_path / "token.new"
    fresh.write_text("third!\n")
    os.utime(fresh, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    fresh.replace(path)
    assert await provider.token() == "third!"

    path.unlink()  # mid-rotation: the last token still stands
    assert await provider.token() == "third!"


def test_an_unreadable_token_file_stops_the_start(tmp_path: Path) -> None:
    security = KafkaSecurity(
        protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", oauth_token_file=tmp_path / "none"
    )
    with pytest.raises(ValueError, match="kafka_sasl_oauth_token_file: cannot read"):
        client_options(security)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        FileToken(tmp_path / "empty")


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"protocol": "SASL_SSL"}, "SASL_SSL needs kafka_sasl_mechanism"),
        (
            {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "username": "u"},
            "needs kafka_sasl_username and",
        ),
        (
            {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "password": "p"},
            "SCRAM-SHA-256 needs",
        ),
        ({"sasl_mechanism": "PLAIN", "username": "u", "password": "p"}, "PLAINTEXT does not use SASL"),
        ({"protocol": "SSL", "username": "u"}, "kafka_sasl_username set, but kafka_security_protocol SSL"),
        ({"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}, "OAUTHBEARER needs"),
        (
            {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "OAUTHBEARER",
                "oauth_token": "t",
                "oauth_token_file": Path("f"),
            },
            "OAUTHBEARER needs",
        ),
        (
            {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth_token": "t", "username": "u"},
            "kafka_sasl_username set, but kafka_sasl_mechanism OAUTHBEARER",
        ),
        (
            {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
                "username": "u",
                "password": "p",
                "oauth_token": "t",
            },
            "kafka_sasl_oauth_token set, but kafka_sasl_mechanism PLAIN",
        ),
        (
            {
                "protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "username": "u",
                "password": "p",
                "ssl_cafile": Path("ca.pem"),
            },
            "kafka_ssl_cafile set, but kafka_security_protocol SASL_PLAINTEXT",
        ),
        (
            {"protocol": "SSL", "ssl_keyfile": Path("k.pem")},
            "kafka_ssl_keyfile is set without kafka_ssl_certfile",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused_in_one_line(
    fields: dict[str, object], needle: str
) -> None:
    with pytest.raises(ValueError) as caught:
        client_options(KafkaSecurity(**fields))  # type: ignore[arg-type]
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert "'p'" not in str(caught.value)


def test_settings_reach_the_log_and_bad_ones_stop_the_start(tmp_path: Path) -> None:
    password_file = tmp_path / "kafka-password"
    password_file.write_text("from-the-secret\n")
    settings = Settings(
        log="kafka://k1:9092",
        kafka_security_protocol="sasl_plaintext",  # any case, as Kafka's clients accept
        kafka_sasl_mechanism="scram-sha-256",
        kafka_sasl_username="gateway",
        kafka_sasl_password_file=password_file,
    )
    log = build_log(settings)
    assert isinstance(log, KafkaLog)
    assert log.options.security == KafkaSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        username="gateway",
        password="from-the-secret",
    )
    assert "from-the-secret" not in repr(settings) and "from-the-secret" not in repr(log.options)

    no_password = settings.model_copy(update={"kafka_sasl_password_file": None})
    with pytest.raises(
        BackendNotAvailable, match="SCRAM-SHA-256 needs kafka_sasl_username and kafka_sasl_password"
    ):
        build_log(no_password)
    both = settings.model_copy(update={"kafka_sasl_password": "x"})
    with pytest.raises(
        BackendNotAvailable, match="set kafka_sasl_password or kafka_sasl_password_file, not both"
    ):
        build_log(both)
    missing = settings.model_copy(update={"kafka_sasl_password_file": tmp_path / "none"})
    with pytest.raises(BackendNotAvailable, match="kafka_sasl_password_file: cannot read"):
        build_log(missing)


def _verify_failed(message: str) -> ssl.SSLCertVerificationError:
    """What a handshake raises for a certificate its CAs do not vouch for."""
    exc = ssl.SSLCertVerificationError(
        1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}"
    )
    exc.verify_message = message
    return exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            ke.SaslAuthenticationFailed("Authentication failed: Invalid username or password"),
            "The Kafka cluster at k1:9092 refused the gateway's credentials (SASL_SSL, PLAIN as 'gw'): "
            "[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or password",
        ),
        (
            ke.UnsupportedSaslMechanismError("Kafka broker does not support PLAIN sasl mechanism."),
            "The Kafka cluster at k1:9092 refused the gateway's credentials (SASL_SSL, PLAIN as 'gw'): "
            "[Error 33] UnsupportedSaslMechanismError: Kafka broker does not support PLAIN sasl mechanism.",
        ),
        (
            _verify_failed("unable to get local issuer certificate"),
            "The Kafka cluster at k1:9092 failed the TLS handshake (SASL_SSL, PLAIN as 'gw'): "
            "unable to get local issuer certificate",
        ),
    ],
)
def test_a_refusal_at_start_says_so(exc: Exception, expected: str) -> None:
    error = start_failure(exc, SERVERS, idempotence=False, timeout_ms=500, security="SASL_SSL, PLAIN as 'gw'")
    assert str(error) == expected
    assert error.http_status == 503


def test_aiokafka_scram_refusal_is_worded_as_one() -> None:
    # aiokafka's SCRAM fails with KeyError('v') when the broker's final message is an error
    error = start_failure(
        KeyError("v"),
        SERVERS,
        idempotence=False,
        timeout_ms=500,
        security="SASL_PLAINTEXT, SCRAM-SHA-256 as 'gw'",
    )
    expected = "refused the gateway's credentials (SASL_PLAINTEXT, SCRAM-SHA-256 as 'gw')"
    assert str(error) == f"The Kafka cluster at k1:9092 {expected}"
    plain = start_failure(KeyError("v"), SERVERS, idempotence=False, timeout_ms=500)
    assert str(plain).startswith("Cannot reach the Kafka cluster at k1:9092")
