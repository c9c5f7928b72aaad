"""The push subscriptions' API (a brokergate extension): a subscription's spec, and how it is shown.

A subscription is created with ``PUT /v3/clusters/{cluster_id}/push-subscriptions/{name}`` and a
``PushSubscriptionSpec``; the same request with another spec replaces it (where it reads from is
kept). It is shown as a ``PushSubscription``: the spec, whether it is paused, and its
status. Its signing secret is shown at creation and when rotated, never again.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.core.rules import MAX_OFFSET

Topic = Annotated[str, StringConstraints(max_length=300)]


class Batching(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_records: int = Field(1, ge=1, description="Most records in one request (1: a request a record).")
    max_bytes: int = Field(1024 * 1024, ge=1, description="Most bytes of records in one request.")


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_backoff_ms: int = Field(1_000, ge=1, description="The first back-off; it doubles per attempt.")
    max_backoff_ms: int = Field(60_000, ge=1, description="The longest back-off, Retry-After included.")
    max_attempts: int = Field(5, ge=1, description="Requests a record is sent in before it is dead-lettered.")


class Authentication(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["webhook", "bearer", "none"] = Field(
        "webhook",
        description="webhook: signed as the Standard Webhooks specification says (webhook-id, "
        "webhook-timestamp, webhook-signature); bearer: an Authorization header with the token.",
    )
    token: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, description="With type bearer: the token sent."
    )


class PushSubscriptionSpec(BaseModel):
    """What a subscription delivers, where and how; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    endpoint: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="The URL each request is POSTed to: an allowed destination (push_allowed_destinations)."
    )
    topics: list[Topic] | None = Field(None, min_length=1, max_length=100)
    topic_pattern: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        None, description="Instead of topics: a regular expression every delivered topic's name matches."
    )
    format: Literal["binary", "json", "string", "avro", "jsonschema", "protobuf"] = Field(
        "binary", description="How keys and values are shown in the body, as a v2 consumer of that format."
    )
    start: Literal["earliest", "latest"] = Field("latest", description="Where a partition never read starts.")
    start_timestamp_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_OFFSET,
        description="Instead of start: each partition of the named topics starts at its first record "
        "timestamped at or after this time.",
    )
    batching: Batching = Field(default_factory=Batching)
    max_in_flight: int = Field(1, ge=1, description="Requests in flight at once.")
    ordering: Literal["none", "key", "partition"] = Field(
        "none",
        description="key or partition: a record is not sent before the one before it with its key (in "
        "its partition), or in its partition, was settled.",
    )
    ack_deadline_ms: int = Field(10_000, ge=100, description="How long a request may take in all.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    dead_letter_topic: Topic | None = Field(
        None, description="Where records out of attempts, or refused by a 4xx, are copied (with headers)."
    )
    authentication: Authentication = Field(default_factory=Authentication)


class PushStatus(BaseModel):
    backlog: int = Field(description="Records not yet settled: in flight, or not yet sent.")
    held: int = Field(description="Records a deliverer holds (acquired, not settled).")
    delivering: bool = Field(description="Whether this replica is the one delivering it.")
    delivered: int | None = Field(None, description="Records settled by this replica's deliverer.")
    delivery_rate: float | None = Field(None, description="Records settled a second, the last 10 s.")
    requests: int | None = None
    failures: int | None = Field(None, description="Requests that did not settle their records.")
    dead_lettered: int | None = None
    in_flight: int | None = Field(None, description="Requests in flight now.")
    last_status: int | None = None
    last_error: str | None = None
    last_error_time_ms: int | None = None


class Metadata(BaseModel):
    self: str
    resource_name: str


class PushSubscription(PushSubscriptionSpec):
    kind: Literal["KafkaPushSubscription"]
    metadata: Metadata
    cluster_id: str
    name: str
    owner: str
    paused: bool
    created_ms: int
    secret: str | None = Field(
        None, description="The signing secret (whsec_…): in the answer of a creation or a rotation only."
    )
    status: PushStatus


class PushSubscriptionList(BaseModel):
    kind: Literal["KafkaPushSubscriptionList"]
    metadata: dict[str, str | None]
    data: list[PushSubscription]
