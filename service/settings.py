"""The one settings object, built once at start and passed in.

Every field is settable as ``BROKERGATE_<FIELD>`` (upper case) and, for the
common ones, as a ``brokergate serve`` flag. Nothing reads the environment at
import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .core.ports import FlushPolicy
from .core.rules import valid_topic
from .core.schemas.model import Compatibility
from .core.schemas.serde import SubjectNameStrategy

__all__ = ["FlushPolicy", "Settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BROKERGATE_", extra="ignore")

    host: str = "0.0.0.0"
    port: int = Field(8082, ge=1, le=65535)
    data_dir: Path = Path("./data")
    log: str = "embedded"
    coordinator: str = "embedded"
    sessions: str = "embedded"
    advertised_url: str | None = Field(
        None, description="Base URL put in consumer base_uri; default: see allowed_hosts."
    )
    allowed_hosts: str = Field(
        "localhost,127.0.0.1,::1",
        description="Without advertised_url: Host header names (comma-separated; '*' for any) that "
        "base_uri may be built from; any other Host gets the address the connection reached.",
    )
    node_id: str | None = Field(None, description="This replica's id; default: hostname-pid.")

    # embedded log
    flush: FlushPolicy = "always"
    flush_interval_ms: int = Field(1000, ge=1)
    segment_bytes: int = Field(
        64 * 1024 * 1024, ge=1024 * 1024, description="Default segment size; at least 1 MiB, as in Kafka."
    )
    sealed_fds: int = Field(
        128,
        ge=0,
        description="Most sealed segments' log files kept open for reads, all partitions together "
        "(the least recently used is closed first; each partition's active segment keeps its own).",
    )
    segment_ms: int = Field(7 * 24 * 3600 * 1000, ge=1000)
    retention_ms: int = Field(7 * 24 * 3600 * 1000, ge=-1)
    retention_bytes: int = Field(-1, ge=-1)
    retention_check_ms: int = Field(60_000, ge=100)

    # topics
    auto_create_topics_enable: bool = True
    default_partitions: int = Field(1, ge=1)

    # consumers
    consumer_instance_timeout_ms: int = Field(300_000, ge=1000)
    max_instances_per_group: int = Field(
        1_000, ge=1, description="Most consumer instances one group may have (409 beyond)."
    )
    max_instances: int = Field(10_000, ge=1, description="Most consumer instances in all (409 beyond).")
    max_instances_per_principal: int = Field(
        1_000,
        ge=1,
        description="Most of max_instances (share consumers included) one authenticated principal may "
        "hold, counted across replicas with Redis sessions (409 beyond).",
    )
    max_open_polls: int = Field(
        1_000,
        ge=1,
        description="Most long-polls and stateless reads open at once (503 + Retry-After beyond).",
    )
    max_open_polls_per_principal: int = Field(
        100,
        ge=1,
        description="Most of max_open_polls one principal (an address, with authentication off) may "
        "hold (503 + Retry-After beyond).",
    )
    consumer_max_instance_timeout_ms: int = Field(
        3_600_000,
        ge=1000,
        description="Largest consumer.instance.timeout.ms a client may ask for (42204 beyond).",
    )
    consumer_request_timeout_ms: int = Field(1000, ge=0)
    consumer_max_timeout_ms: int = Field(60_000, ge=0)
    consumer_max_bytes: int = Field(64 * 1024 * 1024, ge=1)
    reaper_interval_ms: int = Field(1000, ge=50)
    metadata_refresh_ms: int = Field(2000, ge=50)

    # push streams: Server-Sent Events and WebSockets over consumer instances and partitions
    max_open_streams: int = Field(
        1_000, ge=1, description="Most SSE and WebSocket streams open at once (503 + Retry-After beyond)."
    )
    max_open_streams_per_principal: int = Field(
        100,
        ge=1,
        description="Most of max_open_streams one principal (an address, with authentication off) may "
        "hold (503 + Retry-After beyond).",
    )
    stream_heartbeat_ms: int = Field(
        15_000, ge=100, description="An idle SSE stream sends a ': keep-alive' comment this often."
    )
    stream_max_lifetime_ms: int = Field(
        0,
        ge=0,
        description="A stream ends (end event, reason error, 50301) once open this long, so that its "
        "client authenticates again; 0: no limit.",
    )
    stream_send_timeout_ms: int = Field(
        30_000,
        ge=100,
        description="A stream whose client takes nothing of what is sent for this long is closed.",
    )
    stream_max_batch_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Most record bytes one stream event or message carries (a larger record comes alone).",
    )
    stream_max_credit_records: int = Field(
        100_000, ge=1, description="Most records a WebSocket client may have granted and not yet received."
    )
    stream_max_credit_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="Most record bytes a WebSocket client may have granted and not yet received.",
    )
    stream_max_message_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest WebSocket message a client may send (closed with 1009 beyond).",
    )
    stream_max_held_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="Most bytes of one WebSocket's messages (produces, commits, seeks) read and not yet "
        "answered, counted raw; past it nothing more is read from that socket until some are answered.",
    )
    stream_max_held_bytes_per_principal: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="The same, for all the WebSockets of one principal (one address, with authentication "
        "off) together.",
    )

    # share groups (KIP-932): queues with per-record acknowledgement
    share_record_lock_duration_ms: int = Field(
        30_000,
        ge=100,
        le=3_600_000,
        description="How long a share consumer holds a record it acquired before it is delivered again "
        "(Kafka's group.share.record.lock.duration.ms).",
    )
    share_delivery_attempt_limit: int = Field(
        5,
        ge=2,
        le=10,
        description="Deliveries of a record before it is archived (group.share.delivery.attempt.limit).",
    )
    share_partition_max_record_locks: int = Field(
        2000,
        ge=100,
        le=10_000,
        description="Most records in flight per share-partition (group.share.partition.max.record.locks).",
    )
    share_dead_letter_topic: str = Field(
        "",
        max_length=300,
        description="Where records out of delivery attempts are copied, {group} and {topic} standing for "
        "the share group and the record's topic (e.g. '{group}.dlq'); empty: they are only archived.",
    )
    share_max_records: int = Field(
        500, ge=1, le=10_000, description="Most records one share-consumer poll acquires (max_records)."
    )
    share_max_groups: int = Field(
        1_000, ge=1, description="Most share groups with stored state (409 beyond)."
    )
    share_max_partitions: int = Field(
        10_000, ge=1, description="Most partitions with stored state per share group (409 beyond)."
    )
    share_max_state_bytes: int = Field(
        512 * 1024,
        ge=16 * 1024,
        le=900 * 1024,
        description="Largest stored state of one share-partition (its records in flight and their errors).",
    )

    # authentication
    auth: str = Field(
        "",
        description="Authentication methods a client may use, comma-separated: basic, jwt, mtls "
        "(empty: off, every request is anonymous).",
    )
    users_file: Path | None = Field(
        None, description="HTTP Basic credentials file (brokergate users); default: <data_dir>/users."
    )
    docs_open: bool = Field(True, description="With auth on: /docs and /openapi.json need no credentials.")
    metrics_open: bool = Field(False, description="With auth on: /metrics answers without credentials.")
    password_guesses_per_address: int = Field(
        20,
        ge=1,
        description="HTTP Basic: wrong passwords one client address may send in a burst before it is "
        "answered 429 (42901) until its budget refills.",
    )
    password_guesses_per_user: int = Field(
        10,
        ge=1,
        description="HTTP Basic: wrong passwords for one user name (known or not) in a burst, from "
        "addresses the user has not signed in from, before they are answered 429.",
    )
    password_guess_refill_s: float = Field(
        6.0,
        gt=0,
        le=3600,
        description="Each guess budget gets one wrong password back per this many seconds.",
    )

    # the web console at /ui: a client of the public API, so it grants nothing the API does not
    ui: bool = Field(
        True, description="Serve the web console at /ui (with auth on, it needs credentials too)."
    )
    ui_read_only: bool = Field(
        False,
        description="The console hides creating and deleting topics and producing; the API itself is "
        "governed by the ACLs.",
    )

    # TLS between clients and the gateway
    tls_cert: Path | None = Field(
        None, description="Certificate chain (PEM) to serve HTTPS with; may hold its key."
    )
    tls_key: Path | None = Field(None, description="The key (PEM) of tls_cert, if apart.")
    tls_key_password: SecretStr | None = Field(None, description="The password of an encrypted tls_key.")
    tls_client_ca: Path | None = Field(
        None,
        description="CA certificates (PEM) client certificates are verified against (mutual TLS); "
        "required of every client unless auth offers mtls beside another method.",
    )
    tls_principal: Literal["cn", "dns", "email", "uri"] = Field(
        "cn",
        description="With auth=mtls: the certificate's name that is the principal: the subject's CN, "
        "or the first DNS name, e-mail address or URI among its subject alternative names.",
    )

    # Bearer JWTs of an OpenID Connect provider (auth=jwt)
    jwt_issuer: str | None = Field(None, description="The provider's issuer URL; tokens must carry it (iss).")
    jwt_audience: str | None = Field(None, description="The audience (aud) tokens must be meant for.")
    jwt_jwks_url: str | None = Field(
        None,
        description="Where the signing keys are; default: the jwks_uri of "
        "<issuer>/.well-known/openid-configuration.",
    )
    jwt_algorithms: str = Field(
        "RS256,ES256", description="Signature algorithms accepted, comma-separated (asymmetric only)."
    )
    jwt_leeway_s: float = Field(30, ge=0, le=600, description="Clock skew allowed on exp and nbf.")
    jwt_principal_claim: str = Field("sub", min_length=1, description="The claim naming the principal.")
    jwt_cafile: Path | None = Field(
        None, description="CA certificates (PEM) to verify the provider's HTTPS with (default: the system's)."
    )

    # the gateway's own credentials to its backends: how it signs in to Kafka, ZooKeeper and Redis
    # (not how clients sign in to it). Secrets are SecretStr, never shown in a repr or a log; a
    # *_file setting names a file holding the secret instead (a mounted Kubernetes Secret), read at
    # start. Combinations are checked when the adapters are built, before anything connects: a bad
    # one stops the start with one line naming the settings.
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description="How the gateway connects to Kafka: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, or SASL_SSL "
        "(SASL over TLS).",
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = Field(
        None, description="With SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER."
    )
    kafka_sasl_username: str | None = Field(None, description="The gateway's Kafka user (PLAIN, SCRAM-*).")
    kafka_sasl_password: SecretStr | None = Field(None, description="Its password (PLAIN, SCRAM-*).")
    kafka_sasl_password_file: Path | None = Field(
        None, description="A file holding the Kafka password, instead of kafka_sasl_password."
    )
    kafka_sasl_oauth_token: SecretStr | None = Field(None, description="OAUTHBEARER: a fixed token.")
    kafka_sasl_oauth_token_file: Path | None = Field(
        None,
        description="OAUTHBEARER: a file holding the token, read again whenever it changes (whatever "
        "refreshes the token rewrites it).",
    )
    kafka_ssl_cafile: Path | None = Field(
        None,
        description="With SSL or SASL_SSL: CA certificates (PEM) the brokers' certificates and hostnames "
        "are checked against; default: the system's.",
    )
    kafka_ssl_certfile: Path | None = Field(
        None, description="The gateway's client certificate (PEM) for Kafka's mutual TLS; may hold its key."
    )
    kafka_ssl_keyfile: Path | None = Field(None, description="The key (PEM) of kafka_ssl_certfile, if apart.")
    kafka_ssl_password: SecretStr | None = Field(None, description="The password of an encrypted Kafka key.")
    zookeeper_username: str | None = Field(
        None,
        description="ZooKeeper digest user: the session signs in as it, and every znode the gateway "
        "creates is changeable by it alone (the same on every replica).",
    )
    zookeeper_password: SecretStr | None = Field(None, description="The ZooKeeper digest password.")
    zookeeper_password_file: Path | None = Field(
        None, description="A file holding the ZooKeeper password, instead of zookeeper_password."
    )
    zookeeper_world_readable: bool = Field(
        True,
        description="With ZooKeeper credentials: anyone may still read the gateway's znodes (offsets, "
        "ACL bindings), as Kafka's zookeeper.set.acl leaves them; false: only the gateway.",
    )
    redis_username: str | None = Field(
        None,
        description="Redis ACL user (with redis_password); without it, the password is the default user's.",
    )
    redis_password: SecretStr | None = Field(None, description="Redis password (AUTH).")
    redis_password_file: Path | None = Field(
        None, description="A file holding the Redis password, instead of redis_password."
    )
    redis_ssl_cafile: Path | None = Field(
        None,
        description="With rediss:// sessions: CA certificates (PEM) Redis's certificate and hostname are "
        "checked against; default: the system's.",
    )
    redis_ssl_certfile: Path | None = Field(
        None,
        description="The gateway's client certificate (PEM) for Redis's tls-auth-clients; may hold its key.",
    )
    redis_ssl_keyfile: Path | None = Field(None, description="The key (PEM) of redis_ssl_certfile, if apart.")
    redis_ssl_password: SecretStr | None = Field(None, description="The password of an encrypted Redis key.")

    # authorization
    authorize: bool = Field(
        False,
        description="Decide every request by the ACL bindings, Kafka's model: denied unless a binding "
        "allows it (brokergate acls; /v3/clusters/{id}/acls).",
    )
    super_users: str = Field(
        "",
        description="Principals allowed everything, whatever the bindings, e.g. User:admin "
        "(separated by ';' as Kafka's super.users, or ',').",
    )
    audit_log: Path | None = Field(
        None,
        description="File the audit trail is appended to, one JSON line per security decision; "
        "default: the process's log (logger brokergate.audit).",
    )
    log_lines_per_s: int = Field(
        100,
        ge=1,
        description="Most lines the process log takes a second (the audit trail apart); the rest are "
        "counted and the count logged (log.suppressed) once the second is over.",
    )
    log_traceback_bytes: int = Field(
        8 * 1024,
        ge=512,
        description="Longest traceback the process log takes (its start and end kept); one error site's "
        "traceback is written once a minute, its repeats in one line.",
    )

    # limits
    max_connections: int = Field(
        1_000, ge=1, description="Most client connections open at once (503 + Retry-After beyond)."
    )
    max_connections_per_address: int = Field(
        100,
        ge=1,
        description="Most of max_connections one client address may hold, counted from the TCP accept "
        "(503 + Retry-After beyond); a proxy in FORWARDED_ALLOW_IPS is held to max_connections only.",
    )
    tls_handshake_timeout_ms: int = Field(
        10_000, ge=100, description="Time a TLS handshake has to finish (the connection is closed beyond)."
    )
    header_timeout_ms: int = Field(
        10_000, ge=100, description="Time a request's headers have to arrive (408 and closed beyond)."
    )
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="Largest request line plus headers (431 and closed beyond)."
    )
    max_request_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="Largest request body (413 beyond); parsing one holds the event loop about 1 ms per MiB.",
    )
    max_record_bytes: int = Field(
        8 * 1024 * 1024, ge=16, description="Largest record: key, value and headers (413 beyond)."
    )
    max_records_per_request: int = Field(
        10_000, ge=1, description="Most records one produce request may carry (413 beyond)."
    )
    max_headers_per_record: int = Field(
        100, ge=0, description="Most headers one record may carry (413 beyond)."
    )
    max_json_depth: int = Field(
        64,
        ge=4,
        le=128,
        description="Deepest nesting of objects and arrays in JSON a client sends, a request body or a "
        "WebSocket message counted whole (422 beyond).",
    )

    # the schema registry: Confluent's schema-registry API at /schema-registry
    schema_registry: str = Field(
        "embedded",
        description="'embedded': brokergate is the registry, its state in the log's schema_registry_topic, "
        "shared by every replica on the same log and coordinator; or the http(s):// URL of an external "
        "Confluent-compatible registry the gateway uses instead.",
    )
    schema_registry_topic: str = Field(
        "_schemas",
        pattern=r"^[a-zA-Z0-9._-]{1,249}$",
        description="The topic holding the registry's records, in Confluent's format (one partition, "
        "compacted where the log compacts, kept forever); created by the first write.",
    )
    schema_subject_strategy: SubjectNameStrategy = Field(
        SubjectNameStrategy.TOPIC,
        description="The subject a schema given inline to a produce is registered under: 'topic' "
        "({topic}-key / {topic}-value), 'record' (the record's full name) or 'topic_record' "
        "({topic}-{record full name}), as Confluent's subject name strategies.",
    )
    schema_registry_compatibility: Compatibility = Field(
        Compatibility.BACKWARD,
        description="Compatibility level of a subject that sets none, with no global one.",
    )
    schema_registry_max_schema_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest schema text a client may register (413, 42201 beyond)."
    )
    schema_registry_max_schemas: int = Field(
        10_000, ge=1, description="Most schema ids the registry holds (422, 42205 beyond)."
    )
    schema_registry_max_subjects: int = Field(
        10_000, ge=1, description="Most subjects the registry holds (422, 42205 beyond)."
    )
    schema_registry_max_versions: int = Field(
        1_000, ge=1, description="Most versions one subject holds, soft-deleted ones too (422, 42205 beyond)."
    )
    schema_registry_max_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Most bytes of schema text the registry holds, every id together (422, 42205 beyond).",
    )
    schema_registry_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Parsed schemas kept in memory, counted by the size of their texts (least recently used "
        "out first).",
    )
    schema_registry_lock_timeout_ms: int = Field(
        10_000,
        ge=100,
        description="Longest wait of a registry write for the writer lock every replica shares "
        "(503, 50002 beyond).",
    )
    # an external registry (schema_registry is its URL): how the gateway signs in to it, the TLS it
    # checks, how long it waits on it. Secrets as for the other backends: never shown, or in a file.
    schema_registry_username: str | None = Field(
        None, description="HTTP Basic user the gateway signs in to an external registry as."
    )
    schema_registry_password: SecretStr | None = Field(None, description="Its password.")
    schema_registry_password_file: Path | None = Field(
        None, description="A file holding the registry password, instead of schema_registry_password."
    )
    schema_registry_ssl_cafile: Path | None = Field(
        None,
        description="With an https:// registry: CA certificates (PEM) its certificate and hostname are "
        "checked against; default: the system's.",
    )
    schema_registry_ssl_certfile: Path | None = Field(
        None,
        description="The gateway's client certificate (PEM) for the registry's mutual TLS; may hold its key.",
    )
    schema_registry_ssl_keyfile: Path | None = Field(
        None, description="The key (PEM) of schema_registry_ssl_certfile, if apart."
    )
    schema_registry_ssl_password: SecretStr | None = Field(
        None, description="The password of an encrypted registry client key."
    )
    schema_registry_request_timeout_ms: int = Field(
        5_000,
        ge=100,
        description="Longest wait for one answer of an external registry before answering 503 (schemas "
        "already known are not asked again).",
    )

    # the produce fast path (service.api.fastpath): the two produce routes served without FastAPI's
    # per-request machinery; the same answers either way, off only to compare or to debug
    produce_fast_path: bool = Field(
        True, description="Serve produce requests on the fast path (the same answers, less CPU)."
    )

    # idempotent produce (Idempotency-Key header)
    idempotency_window_ms: int = Field(
        24 * 3600 * 1000, ge=1000, description="How long a produce's Idempotency-Key answers its retries."
    )
    idempotency_max_keys: int = Field(
        100_000,
        ge=1,
        description="Most Idempotency-Keys the embedded sessions keep (oldest answered go first).",
    )
    idempotency_max_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Most bytes the embedded sessions' idempotency records take."
    )
    idempotency_wait_ms: int = Field(
        30_000, ge=0, description="How long a duplicate waits for the first request with its key."
    )

    # redis sessions (--sessions redis://...)
    redis_connect_timeout_ms: int = Field(
        2_000, ge=50, description="How long start waits for Redis, and the longest wait to connect."
    )
    redis_socket_timeout_ms: int = Field(
        2_000, ge=50, description="Longest wait for one Redis reply before answering 503."
    )
    redis_key_prefix: str = Field(
        "brokergate:", min_length=1, description="Prefix of every Redis key: one per deployment."
    )
    redis_ttl_margin_ms: int = Field(
        60_000, ge=0, description="How long an idle instance outlives its timeout in Redis, for the reaper."
    )

    # quotas (0 = off): token buckets per client (API key, else address) and per topic, in Redis when
    # the sessions are, so shared by every replica; bytes are record keys + values + headers
    quota_client_produce_bytes_per_s: int = Field(
        0, ge=0, description="Produce quota of each client, bytes/s (Kafka's producer_byte_rate)."
    )
    quota_client_consume_bytes_per_s: int = Field(
        0, ge=0, description="Consume quota of each client, bytes/s (Kafka's consumer_byte_rate)."
    )
    quota_topic_produce_bytes_per_s: int = Field(
        0, ge=0, description="Produce quota of each topic, bytes/s, shared by all its producers."
    )
    quota_topic_consume_bytes_per_s: int = Field(
        0, ge=0, description="Consume quota of each topic, bytes/s, shared by all its readers."
    )
    quota_client_requests_per_s: float = Field(
        0, ge=0, allow_inf_nan=False, description="Produce and read requests each client may send per second."
    )
    quota_burst_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds of its rate an idle client or topic may use at once.",
    )
    quota_client_header: str = Field(
        "X-API-Key",
        pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]*$",
        description="Header naming the client for quotas; without it (or if empty), its address does.",
    )

    # zookeeper coordinator
    zookeeper_session_timeout_ms: int = Field(
        10_000, ge=500, description="ZooKeeper session timeout: how soon a dead replica's leadership moves."
    )
    zookeeper_connect_timeout_ms: int = Field(
        10_000, ge=100, description="How long start waits for ZooKeeper before refusing to start."
    )
    zookeeper_request_timeout_ms: int = Field(
        5_000, ge=100, description="Longest wait for one ZooKeeper request before answering 503."
    )

    # kafka log (--log kafka://...)
    kafka_client_id: str = Field("brokergate", min_length=1, description="Client id sent to Kafka.")
    kafka_request_timeout_ms: int = Field(
        30_000, ge=100, description="Longest wait on the Kafka cluster (start, produce, admin) before 503."
    )
    kafka_linger_ms: int = Field(0, ge=0, description="How long a produce batch may wait for company.")
    kafka_batch_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest Kafka record batch (capped by the topic's max.message.bytes).",
    )
    kafka_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "none", description="Batch compression; snappy, lz4 and zstd need their Python package."
    )
    kafka_buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Records handed to the producer and not yet acknowledged."
    )
    kafka_readahead_bytes: int = Field(
        32 * 1024 * 1024, ge=0, description="Fetched records kept for sequential readers (0: off)."
    )
    kafka_idempotence: bool = Field(
        True, description="Idempotent producer; off only for brokers without InitProducerId (Tansu 0.6)."
    )
    kafka_metadata_max_age_ms: int = Field(
        5_000, ge=0, description="How long a described topic (partitions, leaders, configs) is reused."
    )
    kafka_fetch_max_wait_ms: int = Field(
        500, ge=1, description="Longest wait of one FetchRequest; longer polls send several."
    )
    kafka_fetch_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Bytes asked per partition and fetch (what exceeds max_bytes is read ahead).",
    )

    @field_validator("kafka_compression")
    @classmethod
    def _kafka_codec(cls, v: str) -> str:
        if v in ("none", "gzip"):  # gzip is in the standard library
            return v
        from aiokafka import codec  # only when a codec with an optional package is asked for

        if not {"snappy": codec.has_snappy, "lz4": codec.has_lz4, "zstd": codec.has_zstd}[v]():
            raise ValueError(f"kafka_compression {v!r} needs its Python package, which is not installed")
        return v

    @field_validator("log")
    @classmethod
    def _log_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith("kafka://"):
            raise ValueError("log must be 'embedded' or 'kafka://host:port[,host:port...]'")
        return v

    @field_validator("coordinator")
    @classmethod
    def _coordinator_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith("zookeeper://"):
            raise ValueError("coordinator must be 'embedded' or 'zookeeper://host:port[,...][/chroot]'")
        return v

    @field_validator("sessions")
    @classmethod
    def _sessions_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith(("redis://", "rediss://")):
            raise ValueError("sessions must be 'embedded' or 'redis://host:port/db' (rediss:// for TLS)")
        return v

    @field_validator("share_dead_letter_topic")
    @classmethod
    def _dead_letter_topic(cls, v: str) -> str:
        if v and not valid_topic(v.replace("{group}", "g").replace("{topic}", "t")):
            raise ValueError(
                "share_dead_letter_topic must make a topic name ([a-zA-Z0-9._-]) of the group's and the "
                "topic's, e.g. '{group}.dlq'"
            )
        return v

    @field_validator("schema_registry")
    @classmethod
    def _registry_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith(("http://", "https://")):
            raise ValueError("schema_registry must be 'embedded' or the http(s):// URL of a registry")
        return v

    @model_validator(mode="after")
    def _registry_client(self) -> Settings:
        """The external registry's client settings fit the URL and one another."""
        given = [name for name in REGISTRY_CLIENT_SETTINGS if getattr(self, name) is not None]
        if self.schema_registry == "embedded":
            if given:
                raise ValueError(
                    f"{', '.join(given)} set, but schema_registry is 'embedded'; they are for an external "
                    "registry's URL"
                )
            return self
        url = urlsplit(self.schema_registry)
        if "@" in url.netloc:  # the URL is shown in messages and logs: the password must not be in it
            raise ValueError(
                "schema_registry: give the credentials in schema_registry_username and "
                "schema_registry_password (or _file), not in the URL"
            )
        try:
            _ = url.port  # parsing it is the check
        except ValueError:
            raise ValueError(f"schema_registry {self.schema_registry!r}: the port is not 1-65535") from None
        if not url.hostname or url.query or url.fragment:
            raise ValueError(
                f"schema_registry {self.schema_registry!r} is not http(s)://host[:port][/path] "
                "(no query, no fragment)"
            )
        tls = [name for name in given if name.startswith("schema_registry_ssl_")]
        if tls and url.scheme != "https":
            raise ValueError(f"{', '.join(tls)} set, but schema_registry is http://; use https://")
        password = self.schema_registry_password is not None or self.schema_registry_password_file is not None
        if self.schema_registry_password is not None and self.schema_registry_password_file is not None:
            raise ValueError("set schema_registry_password or schema_registry_password_file, not both")
        if self.schema_registry_username is not None and not password:
            raise ValueError("schema_registry_username needs schema_registry_password (or _file)")
        if password and self.schema_registry_username is None:
            raise ValueError("schema_registry_password needs schema_registry_username, the user it is of")
        if self.schema_registry_ssl_keyfile is not None and self.schema_registry_ssl_certfile is None:
            raise ValueError(
                "schema_registry_ssl_keyfile is set without schema_registry_ssl_certfile, the certificate "
                "it belongs to"
            )
        if self.schema_registry_ssl_password is not None and self.schema_registry_ssl_certfile is None:
            raise ValueError("schema_registry_ssl_password is set without schema_registry_ssl_certfile")
        return self

    @field_validator("schema_registry_compatibility", mode="before")
    @classmethod
    def _level_upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _kafka_names_upper(cls, v: object) -> object:
        # Kafka's own configs spell them in capitals; accept any case, as its clients do
        return v.upper() if isinstance(v, str) else v

    @field_validator("auth")
    @classmethod
    def _auth_methods(cls, v: str) -> str:
        unknown = set(cls.split(v)) - AUTH_METHODS
        if unknown:
            raise ValueError(f"unknown auth method(s) {sorted(unknown)}; known: {sorted(AUTH_METHODS)}")
        return v

    @field_validator("jwt_algorithms")
    @classmethod
    def _jwt_algorithms(cls, v: str) -> str:
        from .security.tokens import ASYMMETRIC

        algorithms = cls.split(v)
        if not algorithms or not set(algorithms) <= ASYMMETRIC:
            raise ValueError(f"jwt_algorithms must be some of {sorted(ASYMMETRIC)}")
        return v

    @field_validator("jwt_issuer", "jwt_jwks_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("https://", "http://")):
            raise ValueError("must be an http(s):// URL")
        return v

    @model_validator(mode="after")
    def _security_combinations(self) -> Settings:
        methods = self.auth_methods
        if self.tls_key is not None and self.tls_cert is None:
            raise ValueError("tls_key is set without tls_cert, the certificate it belongs to")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca needs tls_cert: client certificates are checked only over HTTPS")
        if "mtls" in methods and self.tls_client_ca is None:
            raise ValueError("auth=mtls needs tls_client_ca, the CA that signs the client certificates")
        if "jwt" in methods and self.jwt_issuer is None:
            raise ValueError("auth=jwt needs jwt_issuer (and jwt_jwks_url unless the issuer publishes it)")
        return self

    @property
    def client_cert_required(self) -> bool:
        """Whether the TLS handshake demands a client certificate: always, unless a client may
        authenticate another way."""
        methods = self.auth_methods
        return not ("mtls" in methods and len(methods) > 1)

    @staticmethod
    def split(value: str) -> list[str]:
        """The items of a comma-separated setting."""
        return [item.strip() for item in value.split(",") if item.strip()]

    @property
    def auth_methods(self) -> frozenset[str]:
        return frozenset(self.split(self.auth))

    @property
    def allowed_host_names(self) -> frozenset[str]:
        return frozenset(name.lower() for name in self.split(self.allowed_hosts))

    @property
    def super_user_names(self) -> frozenset[str]:
        return frozenset(self.split(self.super_users.replace(";", ",")))

    @property
    def users_path(self) -> Path:
        return self.users_file or self.data_dir / "users"


AUTH_METHODS = frozenset({"basic", "jwt", "mtls"})
# The settings of the client of an external schema registry: each needs schema_registry to be a URL.
REGISTRY_CLIENT_SETTINGS = (
    "schema_registry_username",
    "schema_registry_password",
    "schema_registry_password_file",
    "schema_registry_ssl_cafile",
    "schema_registry_ssl_certfile",
    "schema_registry_ssl_keyfile",
    "schema_registry_ssl_password",
)
