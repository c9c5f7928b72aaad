"""The gateway's backend credentials for the data source and the jobs: Kafka TLS and SASL, ZooKeeper digest.

A data source or a job reading a Kafka that asks for credentials, or a
ZooKeeper whose znodes only the gateway may read, signs in exactly as the
gateway does: the same settings (``SETTINGS``), checked by the gateway's own
classes (``KafkaSecurity``, ``client_options``, ``DigestCredentials``), so a
combination the gateway refuses is refused here too, in one line. Each
setting comes in three spellings, one per way in:

data source option
    ``kafkaSaslUsername`` (``BackendCredentials.parse``; Spark's option keys
    are case-insensitive).
job flag
    ``--kafka-sasl-username`` (``add_arguments``); a secret has no flag, only
    a file flag and the environment, so it never shows on a command line.
environment
    the gateway's own ``BROKERGATE_KAFKA_SASL_USERNAME`` (``from_arguments``),
    so a job run beside a gateway needs nothing more; a flag wins.

Messages name a setting in the spelling it was given in, never a secret's
value. ``BackendCredentials`` is a plain value: Spark ships it to the tasks
inside the read's options, and each task builds its own clients from it
(``kafka_source``, ``committed``). Password files are read once, where the read
is planned; certificate, key and token files where each client connects.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from pydantic import SecretStr

from service.adapters.kafka.security import KafkaSecurity, client_options
from service.adapters.secrets import secret
from service.adapters.zookeeper.security import DigestCredentials

from .offsets import OptionError

ENV_PREFIX: Final = "BROKERGATE_"


class Setting(NamedTuple):
    """One credential setting: the gateway's name, the data source's option, the job's flag."""

    name: str  # the gateway's setting, as its messages name it: kafka_sasl_username
    option: str  # kafkaSaslUsername
    flag: str | None  # --kafka-sasl-username; None for a secret (environment or option only)

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


SETTINGS: Final = (
    Setting("kafka_security_protocol", "kafkaSecurityProtocol", "--kafka-security-protocol"),
    Setting("kafka_sasl_mechanism", "kafkaSaslMechanism", "--kafka-sasl-mechanism"),
    Setting("kafka_sasl_username", "kafkaSaslUsername", "--kafka-sasl-username"),
    Setting("kafka_sasl_password", "kafkaSaslPassword", None),
    Setting("kafka_sasl_password_file", "kafkaSaslPasswordFile", "--kafka-sasl-password-file"),
    Setting("kafka_sasl_oauth_token", "kafkaSaslOauthToken", None),
    Setting("kafka_sasl_oauth_token_file", "kafkaSaslOauthTokenFile", "--kafka-sasl-oauth-token-file"),
    Setting("kafka_ssl_cafile", "kafkaSslCaFile", "--kafka-ssl-cafile"),
    Setting("kafka_ssl_certfile", "kafkaSslCertFile", "--kafka-ssl-certfile"),
    Setting("kafka_ssl_keyfile", "kafkaSslKeyFile", "--kafka-ssl-keyfile"),
    Setting("kafka_ssl_password", "kafkaSslPassword", None),
    Setting("zookeeper_username", "zookeeperUsername", "--zookeeper-username"),
    Setting("zookeeper_password", "zookeeperPassword", None),
    Setting("zookeeper_password_file", "zookeeperPasswordFile", "--zookeeper-password-file"),
)
_BY_NAME: Final = {s.name: s for s in SETTINGS}
_SETTING_NAME: Final = re.compile(r"\b(?:kafka|zookeeper)_[a-z_]+\b")
_HELP: Final = {
    "kafka_security_protocol": "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL",
    "kafka_sasl_mechanism": "with SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    "kafka_sasl_username": "Kafka user (PLAIN, SCRAM-*)",
    "kafka_sasl_password_file": "a file holding its password (or $BROKERGATE_KAFKA_SASL_PASSWORD)",
    "kafka_sasl_oauth_token_file": "OAUTHBEARER: a file holding the token "
    "(or $BROKERGATE_KAFKA_SASL_OAUTH_TOKEN)",
    "kafka_ssl_cafile": "with SSL or SASL_SSL: CA certificates (PEM) to check the brokers with",
    "kafka_ssl_certfile": "client certificate (PEM) for mutual TLS (an encrypted key's password: "
    "$BROKERGATE_KAFKA_SSL_PASSWORD)",
    "kafka_ssl_keyfile": "the key (PEM) of --kafka-ssl-certfile, if apart",
    "zookeeper_username": "ZooKeeper digest user (the coordinator's znodes may be readable by it alone)",
    "zookeeper_password_file": "a file holding its password (or $BROKERGATE_ZOOKEEPER_PASSWORD)",
}


@dataclass(frozen=True, slots=True)
class BackendCredentials:
    """How the reads sign in: to Kafka (``KafkaSecurity``; PLAINTEXT by default) and to ZooKeeper
    (``DigestCredentials``, or None). Secrets stay out of its repr."""

    kafka: KafkaSecurity = field(default_factory=KafkaSecurity)
    zookeeper: DigestCredentials | None = None

    @classmethod
    def parse(cls, lowered: Mapping[str, str]) -> BackendCredentials:
        """From the data source's options, their keys lowercased; raises ``OptionError``."""
        values = {s.name: lowered[s.option.lower()] for s in SETTINGS if lowered.get(s.option.lower())}
        return cls.from_values(values, {s.name: s.option for s in SETTINGS})

    @classmethod
    def from_values(cls, values: Mapping[str, str], names: Mapping[str, str]) -> BackendCredentials:
        """From setting values by the gateway's names; ``OptionError`` whose message spells each
        setting as ``names`` says (an option, a flag, an environment variable)."""
        try:
            return cls._build(values)
        except ValueError as exc:
            raise OptionError(respell(str(exc), names)) from None

    @classmethod
    def _build(cls, values: Mapping[str, str]) -> BackendCredentials:
        def text(name: str) -> str | None:
            return values.get(name) or None

        def path(name: str) -> Path | None:
            given = text(name)
            return Path(given) if given is not None else None

        def hidden(name: str, *, from_file: bool = False) -> str | None:
            given = text(name)
            return secret(
                SecretStr(given) if given is not None else None,
                path(f"{name}_file") if from_file else None,
                setting=name,
            )

        protocol, mechanism = text("kafka_security_protocol"), text("kafka_sasl_mechanism")
        kafka = KafkaSecurity(
            protocol=protocol.upper() if protocol else "PLAINTEXT",  # type: ignore[arg-type]  # checked by it
            sasl_mechanism=mechanism.upper() if mechanism else None,  # type: ignore[arg-type]
            username=text("kafka_sasl_username"),
            password=hidden("kafka_sasl_password", from_file=True),
            oauth_token=hidden("kafka_sasl_oauth_token"),
            oauth_token_file=path("kafka_sasl_oauth_token_file"),
            ssl_cafile=path("kafka_ssl_cafile"),
            ssl_certfile=path("kafka_ssl_certfile"),
            ssl_keyfile=path("kafka_ssl_keyfile"),
            ssl_key_password=hidden("kafka_ssl_password"),
        )
        client_options(kafka)  # loads the TLS files and the token file: a bad one is named now
        user, password = text("zookeeper_username"), hidden("zookeeper_password", from_file=True)
        if (user is None) != (password is None):
            raise ValueError(
                "ZooKeeper digest credentials need both zookeeper_username and zookeeper_password "
                "(or zookeeper_password_file)"
            )
        zookeeper = DigestCredentials(user, password) if user is not None and password is not None else None
        return cls(kafka, zookeeper)

    def as_options(self) -> dict[str, str]:
        """The data source's options that say what this says (secrets included: the tasks sign in)."""
        k = self.kafka
        given: dict[str, str | Path | None] = {
            "kafka_security_protocol": None if k.protocol == "PLAINTEXT" else k.protocol,
            "kafka_sasl_mechanism": k.sasl_mechanism,
            "kafka_sasl_username": k.username,
            "kafka_sasl_password": k.password,
            "kafka_sasl_oauth_token": k.oauth_token,
            "kafka_sasl_oauth_token_file": k.oauth_token_file,
            "kafka_ssl_cafile": k.ssl_cafile,
            "kafka_ssl_certfile": k.ssl_certfile,
            "kafka_ssl_keyfile": k.ssl_keyfile,
            "kafka_ssl_password": k.ssl_key_password,
        }
        if self.zookeeper is not None:
            given["zookeeper_username"] = self.zookeeper.username
            given["zookeeper_password"] = self.zookeeper.password
        return {_BY_NAME[name].option: str(value) for name, value in given.items() if value is not None}


def respell(message: str, names: Mapping[str, str]) -> str:
    """``message`` with each of the gateway's setting names spelt as ``names`` says."""
    return _SETTING_NAME.sub(lambda m: names.get(m.group(0), m.group(0)), message)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The credential flags every job takes (their values default to the gateway's environment)."""
    group = parser.add_argument_group(
        "backend credentials (default: the gateway's BROKERGATE_KAFKA_* and BROKERGATE_ZOOKEEPER_* "
        "environment variables)"
    )
    for s in SETTINGS:
        if s.flag is not None:
            group.add_argument(s.flag, help=_HELP[s.name])


def from_arguments(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> BackendCredentials:
    """The credentials of the flags, else of the environment; ``OptionError`` naming either."""
    env = os.environ if env is None else env
    values: dict[str, str] = {}
    names: dict[str, str] = {}
    for s in SETTINGS:
        flagged = getattr(args, s.flag[2:].replace("-", "_")) if s.flag is not None else None
        if flagged and s.flag is not None:
            values[s.name], names[s.name] = flagged, s.flag
        elif env.get(s.env):
            values[s.name], names[s.name] = env[s.env], s.env
        else:  # named in a message as what the user would set
            names[s.name] = s.flag or s.env
    return BackendCredentials.from_values(values, names)
