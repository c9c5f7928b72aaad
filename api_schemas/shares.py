"""The share groups' API (a brokergate extension, KIP-932 over HTTP): requests, answers, records.

A share consumer's records are the v2 consumer records with ``delivery_count``: how many times
the record has been delivered (1 the first time; more means a consumer before released it, or
held it past its lock).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from service.core.rules import MAX_OFFSET

from .v2 import ConsumerRecord

# The most offsets one request may settle (listed, or in ranges): a poll acquires at most
# ``share_max_records`` (10,000 at most), so a consumer never needs more.
MAX_ACKNOWLEDGED: Final = 10_000
MAX_ERROR_TEXT: Final = 1_000  # what a consumer may say of a failure (the first 120 characters are kept)

Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]


class CreateShareConsumerRequest(BaseModel):
    """A share consumer's configuration; unknown keys are ignored, as for a consumer instance."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str | None = None
    format: Literal["binary", "json", "string", "avro", "jsonschema", "protobuf"] = "binary"
    auto_offset_reset: Literal["earliest", "latest"] | None = Field(
        None,
        alias="share.auto.offset.reset",
        description="Where the group starts reading a partition it has never read (default latest).",
    )
    consumer_request_timeout_ms: int | None = Field(None, alias="consumer.request.timeout.ms", ge=0)
    consumer_instance_timeout_ms: int | None = Field(None, alias="consumer.instance.timeout.ms", ge=0)


class ShareSubscriptionRequest(BaseModel):
    topics: list[Annotated[str, StringConstraints(max_length=300)]] = Field(min_length=1, max_length=1000)


class ShareSubscriptionResponse(BaseModel):
    topics: list[str]


class Acknowledgement(BaseModel):
    """What the consumer says of records of one partition it holds: ``offsets`` listed, or the
    range ``first_offset``..``last_offset`` (both included)."""

    model_config = ConfigDict(extra="forbid")

    topic: Annotated[str, StringConstraints(max_length=300)]
    partition: int = Field(ge=0, le=2**31 - 1)
    type: Literal["accept", "release", "reject", "renew"] = Field(
        description="accept: done; release: deliver it again now; reject: never deliver it again; "
        "renew: keep holding it a full lock duration longer (in any case: Kafka's are ACCEPT, …)."
    )
    offsets: list[Offset] | None = Field(None, max_length=MAX_ACKNOWLEDGED)
    first_offset: Offset | None = None
    last_offset: Offset | None = None
    error: Annotated[str, StringConstraints(max_length=MAX_ERROR_TEXT)] | None = Field(
        None, description="Why it failed (release, reject): kept with the record for its dead-letter copy."
    )

    @field_validator("type", mode="before")
    @classmethod
    def _any_case(cls, v: object) -> object:
        return v.lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _one_way(self) -> Acknowledgement:
        ranged = self.first_offset is not None or self.last_offset is not None
        if (self.offsets is None) == (not ranged):
            raise ValueError("give 'offsets', or 'first_offset' and 'last_offset'")
        if ranged:
            if self.first_offset is None or self.last_offset is None:
                raise ValueError("a range needs both 'first_offset' and 'last_offset'")
            if not 0 <= self.last_offset - self.first_offset < MAX_ACKNOWLEDGED:
                raise ValueError(f"a range runs forward over at most {MAX_ACKNOWLEDGED} offsets")
        return self

    def offset_list(self) -> tuple[int, ...]:
        if self.offsets is not None:
            return tuple(dict.fromkeys(self.offsets))
        assert self.first_offset is not None and self.last_offset is not None
        return tuple(range(self.first_offset, self.last_offset + 1))


class AcknowledgeRequest(BaseModel):
    acknowledgements: list[Acknowledgement] = Field(max_length=MAX_ACKNOWLEDGED)

    @model_validator(mode="after")
    def _bounded(self) -> AcknowledgeRequest:
        total = sum(
            len(a.offsets) if a.offsets is not None else (a.last_offset or 0) - (a.first_offset or 0) + 1
            for a in self.acknowledgements
        )
        if total > MAX_ACKNOWLEDGED:
            raise ValueError(f"one request settles at most {MAX_ACKNOWLEDGED} offsets")
        return self


class RefusedAcknowledgement(BaseModel):
    topic: str
    partition: int
    offset: int
    message: str


class AcknowledgeResponse(BaseModel):
    """The offsets not settled (their records are not the consumer's: its lock expired, or they
    were never delivered to it, or were settled already); the rest were."""

    refused: list[RefusedAcknowledgement]


class ShareRecord(ConsumerRecord):
    delivery_count: int


class ShareConsumerData(BaseModel):
    consumer_id: str
    subscription: list[str]


class SharePartitionData(BaseModel):
    topic_name: str
    partition_id: int
    start_offset: int = Field(description="Every record before it is done (accepted or archived).")
    end_offset: int = Field(description="The first offset never acquired.")
    available: int = Field(description="In flight: to be delivered (again).")
    acquired: int = Field(description="In flight: held by a consumer under its lock.")
    archiving: int = Field(description="Out of delivery attempts, their dead-letter copy not yet written.")
    lag: int = Field(description="Records not done: in flight, and not yet acquired up to the log's end.")


class ShareGroupData(BaseModel):
    kind: str
    metadata: dict[str, Any]
    cluster_id: str
    share_group_id: str
    state: Literal["Stable", "Empty"]
    consumers: list[ShareConsumerData]
    partitions: list[SharePartitionData]
    lag: int


class ShareGroupList(BaseModel):
    kind: str
    metadata: dict[str, Any]
    data: list[ShareGroupData]


class ResetOffset(BaseModel):
    topic: Annotated[str, StringConstraints(max_length=300)]
    partition: int = Field(ge=0, le=2**31 - 1)
    offset: Offset


class ResetShareGroupRequest(BaseModel):
    """Where the group starts over: ``to`` earliest or latest on ``topics`` (default: every topic
    it has read), or exact ``offsets``. Nothing stays in flight; everything before is done."""

    model_config = ConfigDict(extra="forbid")

    to: Literal["earliest", "latest"] | None = None
    topics: list[Annotated[str, StringConstraints(max_length=300)]] | None = Field(None, max_length=1000)
    offsets: list[ResetOffset] | None = Field(None, max_length=10_000)

    @model_validator(mode="after")
    def _one_way(self) -> ResetShareGroupRequest:
        if (self.to is None) == (self.offsets is None):
            raise ValueError("give 'to' (earliest or latest, with 'topics' if you like) or 'offsets'")
        if self.offsets is not None and self.topics is not None:
            raise ValueError("'topics' goes with 'to'; 'offsets' name their partitions")
        return self
