"""The options of the ``brokergate`` sink (``df.write`` / ``writeStream``), checked on the driver.

The sink writes through a gateway's REST API, so it reaches a gateway as any client does: its URL
and, if it asks for them, HTTP Basic credentials or a Bearer token, over TLS with a CA and maybe a
client certificate (``GatewayAccess``). Each of those falls back to the variable the command-line
tools read (``BROKERGATE_URL``, ``BROKERGATE_USER``...), so a job run beside ``brokergate`` needs
nothing more. Secrets may be given as options, as ``…File`` options naming a file, or by the
environment; they are read here, once, and travel to the tasks inside the writer.

What the records are made of (``format`` and its schemas) and how they are cut into requests
(``maxRecordsPerRequest``, ``maxBytesPerRequest``) are part of each request's identity: a retried
task sends the same requests, under the same ``Idempotency-Key``s, only if they are the same.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from service.adapters.secrets import read_secret_file
from service.client import GatewayClient
from service.core.rules import valid_topic

from .offsets import OptionError, parse_count
from .option_names import STREAM_WRITE, WRITE

FORMATS: Final = ("binary", "json", "avro", "jsonschema", "protobuf")
SCHEMA_FORMATS: Final = frozenset({"avro", "jsonschema", "protobuf"})
DEFAULT_MAX_RECORDS: Final = 1000
DEFAULT_MAX_BYTES: Final = 4 << 20
DEFAULT_DELIVERY_TIMEOUT_MS: Final = 120_000
# A write id becomes part of every Idempotency-Key (255 printable characters at most).
_WRITE_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# option (lowercased) -> the command-line tools' environment variable it falls back to
_ENV: Final = {
    "gateway": "BROKERGATE_URL",
    "gatewayusername": "BROKERGATE_USER",
    "gatewaypassword": "BROKERGATE_PASSWORD",
    "gatewaytoken": "BROKERGATE_TOKEN",
    "gatewaycafile": "BROKERGATE_CACERT",
    "gatewaycertfile": "BROKERGATE_CERT",
    "gatewaykeyfile": "BROKERGATE_KEY",
}


@dataclass(frozen=True, slots=True)
class GatewayAccess:
    """How the tasks reach the gateway; secrets stay out of its repr."""

    url: str
    username: str | None = None
    password: str | None = None
    token: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    compression: str | None = None  # request bodies coded gzip or zstd

    def __repr__(self) -> str:
        signed = "basic" if self.username else "token" if self.token else "none"
        return f"GatewayAccess(url={self.url!r}, auth={signed})"

    def client(self, timeout_s: float) -> GatewayClient:
        cert: str | tuple[str, str] | None = None
        if self.certfile is not None:
            cert = self.certfile if self.keyfile is None else (self.certfile, self.keyfile)
        return GatewayClient(
            self.url,
            timeout=timeout_s,
            auth=(self.username, self.password or "") if self.username else None,
            token=self.token,
            verify=self.cafile if self.cafile is not None else True,
            cert=cert,
            compress=self.compression,
        )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What ``format("brokergate")`` was given for a write."""

    gateway: GatewayAccess
    topic: str | None = None  # wins over a ``topic`` column, as in Spark's Kafka sink
    format: str = "binary"
    key_schema: str | int | None = None  # a schema's text or its registry id
    value_schema: str | int | None = None
    max_records: int = DEFAULT_MAX_RECORDS
    max_bytes: int = DEFAULT_MAX_BYTES
    delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS
    write_id: str | None = None  # a batch write's; a stream's is its query's id

    @classmethod
    def parse(
        cls, options: Mapping[str, str], env: Mapping[str, str] | None = None, *, stream: bool = False
    ) -> SinkOptions:
        """From Spark's option map (keys case-insensitive) of a write (of a ``stream``ing one), the
        environment filling in the gateway's access; raises ``OptionError`` naming the option."""
        (STREAM_WRITE if stream else WRITE).check(options)
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        given = _Given(lowered, os.environ if env is None else env)
        fmt = lowered.get("format", "binary").lower()
        if fmt not in FORMATS:
            raise OptionError(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")
        key_schema = _schema(lowered, "key")
        value_schema = _schema(lowered, "value")
        if fmt not in SCHEMA_FORMATS and (key_schema is not None or value_schema is not None):
            raise OptionError(f"schemas are for the avro, jsonschema and protobuf formats, not {fmt}")
        if fmt in SCHEMA_FORMATS and value_schema is None:
            raise OptionError(f"format {fmt}: give valueSchemaId (a registered schema) or valueSchema")
        write_id = lowered.get("writeid") or None
        if write_id is not None and _WRITE_ID.fullmatch(write_id) is None:
            raise OptionError(f"writeId: {write_id!r} is not 1 to 128 letters, digits and . _ : -")
        topic = lowered.get("topic") or None
        if topic is not None and not valid_topic(topic):
            raise OptionError(f"topic: {topic[:300]!r} is not a topic name (1 to 249 of [a-zA-Z0-9._-])")
        return cls(
            gateway=given.access(),
            topic=topic,
            format=fmt,
            key_schema=key_schema,
            value_schema=value_schema,
            max_records=_positive(lowered, "maxRecordsPerRequest", DEFAULT_MAX_RECORDS),
            max_bytes=_positive(lowered, "maxBytesPerRequest", DEFAULT_MAX_BYTES),
            delivery_timeout_ms=_positive(lowered, "deliveryTimeoutMs", DEFAULT_DELIVERY_TIMEOUT_MS),
            write_id=write_id,
        )


class _Given:
    """An option's value, else its environment variable's; ``…File`` options read here."""

    def __init__(self, lowered: Mapping[str, str], env: Mapping[str, str]) -> None:
        self._lowered, self._env = lowered, env

    def text(self, option: str) -> str | None:
        key = option.lower()
        return self._lowered.get(key) or self._env.get(_ENV.get(key, "")) or None

    def secret(self, option: str) -> str | None:
        inline, file = self._lowered.get(option.lower()), self._lowered.get(f"{option}File".lower())
        if inline and file:
            raise OptionError(f"give {option} or {option}File, not both")
        if file:
            try:
                return read_secret_file(Path(file), setting=f"{option}File")
            except ValueError as exc:
                raise OptionError(str(exc)) from None
        return self.text(option)

    def access(self) -> GatewayAccess:
        url = self.text("gateway")
        if not url:
            raise OptionError("gateway: name the gateway to write through, e.g. http://127.0.0.1:8082")
        if not re.match(r"https?://[^/\s]+", url):
            raise OptionError(f"gateway: {url!r} is not an http:// or https:// URL")
        username, token = self.text("gatewayUsername"), self.secret("gatewayToken")
        if username and token:
            raise OptionError("gatewayUsername and gatewayToken are two ways to sign in: give one")
        password = self.secret("gatewayPassword")  # a file is read (and checked) even without a user
        if not username and (
            self._lowered.get("gatewaypassword") or self._lowered.get("gatewaypasswordfile")
        ):
            raise OptionError("gatewayPassword needs gatewayUsername, the user it is the password of")
        if not username:
            password = None  # $BROKERGATE_PASSWORD alone signs nobody in
        elif password is None:
            raise OptionError("gatewayUsername needs gatewayPassword (or gatewayPasswordFile)")
        files = {
            option: self.text(option) for option in ("gatewayCaFile", "gatewayCertFile", "gatewayKeyFile")
        }
        for option, path in files.items():
            if path is not None and not Path(path).is_file():
                raise OptionError(f"{option}: {path!r} is not a readable file")
        compression = (self._lowered.get("gatewaycompression") or "none").lower()
        if compression not in ("none", "gzip", "zstd"):
            raise OptionError(f"gatewayCompression: {compression!r} is not one of none, gzip, zstd")
        return GatewayAccess(
            url=url.rstrip("/"),
            username=username,
            password=password,
            token=token,
            cafile=files["gatewayCaFile"],
            certfile=files["gatewayCertFile"],
            keyfile=files["gatewayKeyFile"],
            compression=None if compression == "none" else compression,
        )


def _schema(lowered: Mapping[str, str], side: str) -> str | int | None:
    by_id, text = lowered.get(f"{side}schemaid"), lowered.get(f"{side}schema")
    if by_id and text:
        raise OptionError(f"give {side}SchemaId or {side}Schema, not both")
    if by_id:
        if not (by_id.isascii() and by_id.isdigit()):
            raise OptionError(f"{side}SchemaId: {by_id!r} is not a schema id")
        return int(by_id)
    return text or None


def _positive(lowered: Mapping[str, str], option: str, default: int) -> int:
    raw = lowered.get(option.lower())
    return default if raw is None else parse_count(raw, option=option)
