"""How the Kafka log signs in to the cluster: security protocol, SASL credentials, TLS.

``KafkaSecurity`` holds the gateway's own ``kafka_*`` credential settings as plain values and
checks their combination once, at construction, so a SASL mechanism without a password or a CA
file on a PLAINTEXT connection stops the start with a one-line ``ValueError`` naming the
settings. Secrets stay out of its repr.

``client_options`` turns it into the keyword arguments that every aiokafka client of the log
takes (``AIOKafkaClient`` for fetches and metadata, ``AIOKafkaAdminClient``,
``AIOKafkaProducer``): the log builds them once, so all its connections share one
``ssl.SSLContext`` and one token provider and present the same identity. For PLAINTEXT they are
empty: the clients are built exactly as without any of this.

OAUTHBEARER tokens come from ``StaticToken`` (a fixed token) or ``FileToken`` (a file another
process keeps fresh, read again when it changes, so connections made after a refresh carry the
new token). Used by ``KafkaOptions`` (``options``) and ``KafkaLog``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from aiokafka.abc import AbstractTokenProvider

from ..secrets import read_secret_file
from ..tls import client_context

log = logging.getLogger(__name__)

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
PROTOCOLS: Final[tuple[SecurityProtocol, ...]] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final[tuple[SaslMechanism, ...]] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """The gateway's identity towards Kafka; the default is today's PLAINTEXT, no credentials.

    ``username``/``password`` serve PLAIN and SCRAM-*; ``oauth_token`` or ``oauth_token_file``
    serve OAUTHBEARER. The ``ssl_*`` files apply to SSL and SASL_SSL: ``ssl_cafile`` (else the
    system's CAs) checks the brokers' certificates, hostnames included; ``ssl_certfile`` (with
    ``ssl_keyfile`` unless it holds the key, and ``ssl_key_password`` if the key is encrypted)
    is the gateway's client certificate.
    """

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    oauth_token: str | None = field(default=None, repr=False)
    oauth_token_file: Path | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"kafka_security_protocol must be one of {', '.join(PROTOCOLS)}")
        self._check_sasl()
        if not self.uses_tls:
            given = [
                name
                for name, value in (
                    ("kafka_ssl_cafile", self.ssl_cafile),
                    ("kafka_ssl_certfile", self.ssl_certfile),
                    ("kafka_ssl_keyfile", self.ssl_keyfile),
                    ("kafka_ssl_password", self.ssl_key_password),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} set, but kafka_security_protocol {self.protocol} does not use "
                    "TLS; use SSL or SASL_SSL"
                )

    def _check_sasl(self) -> None:
        mechanism = self.sasl_mechanism
        credentials = {
            "kafka_sasl_username": self.username,
            "kafka_sasl_password": self.password,
            "kafka_sasl_oauth_token": self.oauth_token,
            "kafka_sasl_oauth_token_file": self.oauth_token_file,
        }
        if not self.uses_sasl:
            given = [
                name for name, value in {"kafka_sasl_mechanism": mechanism, **credentials}.items() if value
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} set, but kafka_security_protocol {self.protocol} does not use "
                    "SASL; use SASL_PLAINTEXT or SASL_SSL"
                )
            return
        if mechanism is None:
            raise ValueError(
                f"kafka_security_protocol {self.protocol} needs kafka_sasl_mechanism "
                f"({', '.join(MECHANISMS)})"
            )
        if mechanism not in MECHANISMS:
            raise ValueError(f"kafka_sasl_mechanism must be one of {', '.join(MECHANISMS)}")
        if mechanism == "OAUTHBEARER":
            if (self.oauth_token is None) == (self.oauth_token_file is None):
                raise ValueError(
                    "kafka_sasl_mechanism OAUTHBEARER needs kafka_sasl_oauth_token or "
                    "kafka_sasl_oauth_token_file (one of them)"
                )
            wrong = [name for name in ("kafka_sasl_username", "kafka_sasl_password") if credentials[name]]
        else:
            if not self.username or not self.password:
                raise ValueError(
                    f"kafka_sasl_mechanism {mechanism} needs kafka_sasl_username and "
                    "kafka_sasl_password (or kafka_sasl_password_file)"
                )
            wrong = [
                name
                for name in ("kafka_sasl_oauth_token", "kafka_sasl_oauth_token_file")
                if credentials[name]
            ]
        if wrong:
            raise ValueError(f"{', '.join(wrong)} set, but kafka_sasl_mechanism {mechanism} does not use it")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def describe(self) -> str:
        """How the gateway signs in, for messages: ``SASL_SSL, SCRAM-SHA-256 as 'alice'``."""
        if not self.uses_sasl:
            return self.protocol
        who = f" as {self.username!r}" if self.username else ""
        return f"{self.protocol}, {self.sasl_mechanism}{who}"


def client_options(security: KafkaSecurity) -> dict[str, Any]:
    """The keyword arguments that give an aiokafka client ``security``; build once, share them.

    Loads the TLS files and reads the token file now: ``ValueError`` in one line if one cannot be.
    """
    if security.protocol == "PLAINTEXT":
        return {}
    options: dict[str, Any] = {"security_protocol": security.protocol}
    if security.uses_tls:
        options["ssl_context"] = client_context(
            cafile=security.ssl_cafile,
            certfile=security.ssl_certfile,
            keyfile=security.ssl_keyfile,
            password=security.ssl_key_password,
            setting="kafka_ssl",
        )
    if security.uses_sasl:
        options["sasl_mechanism"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            options["sasl_oauth_token_provider"] = (
                FileToken(security.oauth_token_file)
                if security.oauth_token_file is not None
                else StaticToken(security.oauth_token or "")
            )
        else:  # aiokafka's "plain" username and password serve SCRAM too
            options["sasl_plain_username"] = security.username
            options["sasl_plain_password"] = security.password
    return options


class StaticToken(AbstractTokenProvider):
    """An OAUTHBEARER token given once in the settings (for tokens that do not expire soon)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "StaticToken(***)"

    async def token(self) -> str:
        return self._token


class FileToken(AbstractTokenProvider):
    """An OAUTHBEARER token in a file that another process refreshes (a sidecar, a projected
    Kubernetes token): read again whenever the file changes, by identity, size or modification
    time, which also catches Kubernetes' swap of the directory link the file path goes through.

    Read once at construction (``ValueError`` if it cannot be); after that a failed read keeps
    the last token and logs why, and the broker decides whether it still holds.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int, int] | None = None  # the file the token was read from
        self._token = ""
        self.current()

    def __repr__(self) -> str:
        return f"FileToken({str(self.path)!r})"

    async def token(self) -> str:
        # aiokafka asks when it opens a connection; a stat and a small read stay off the event loop
        return await asyncio.to_thread(self.current)

    def current(self) -> str:
        """The file's token now, read only when the file changed since the last read."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            return self._keep(f"kafka_sasl_oauth_token_file: cannot read {str(self.path)!r} ({exc.strerror})")
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen != self._seen:
            try:
                token = read_secret_file(self.path, setting="kafka_sasl_oauth_token_file")
            except ValueError as exc:
                return self._keep(str(exc))
            self._token, self._seen = token, seen
        return self._token

    def _keep(self, why: str) -> str:
        """The last token read, after a failed read; none yet is an error."""
        if not self._token:
            raise ValueError(why)
        log.warning("keeping the last Kafka OAUTHBEARER token: %s", why)
        return self._token
