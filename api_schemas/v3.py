"""Bodies of the Confluent v3 shapes brokergate serves: clusters, topics, consumer groups, lag."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Related(BaseModel):
    related: str


class ResourceMetadata(BaseModel):
    self: str
    resource_name: str | None = None


class ListMetadata(BaseModel):
    self: str
    next: str | None = None


class Cluster(BaseModel):
    kind: str = "KafkaCluster"
    metadata: ResourceMetadata
    cluster_id: str
    brokers: Related
    topics: Related
    consumer_groups: Related


class ClusterList(BaseModel):
    kind: str = "KafkaClusterList"
    metadata: ListMetadata
    data: list[Cluster]


class ConfigEntry(BaseModel):
    name: str = Field(min_length=1)
    value: str | None


TOPIC_NAME = r"^[a-zA-Z0-9._-]{1,249}$"


class CreateTopicRequest(BaseModel):
    # The pattern is documented, not enforced here: the core rejects bad names with 42207.
    topic_name: str = Field(
        description="1-249 of [a-zA-Z0-9._-], not '.' or '..'.", json_schema_extra={"pattern": TOPIC_NAME}
    )
    partitions_count: int | None = Field(
        None, ge=1, description="Default: the gateway's default partition count."
    )
    replication_factor: int | None = Field(None, description="Default: the backend's default.")
    configs: list[ConfigEntry] = Field(default_factory=list)


class UpdatePartitionCountRequest(BaseModel):
    partitions_count: int = Field(ge=1, description="The new, larger partition count.")


class TopicData(BaseModel):
    kind: str = "KafkaTopic"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    is_internal: bool = False
    replication_factor: int
    partitions_count: int
    configs: dict[str, str]
    partitions: Related


class TopicList(BaseModel):
    kind: str = "KafkaTopicList"
    metadata: ListMetadata
    data: list[TopicData]


class BrokerData(BaseModel):
    kind: str = "KafkaBroker"
    metadata: ResourceMetadata
    cluster_id: str
    broker_id: int
    host: str
    port: int


class BrokerList(BaseModel):
    kind: str = "KafkaBrokerList"
    metadata: ListMetadata
    data: list[BrokerData]


class PartitionData(BaseModel):
    kind: str = "KafkaPartition"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    leader: Related
    replicas: list[int]
    beginning_offset: int
    end_offset: int


class PartitionList(BaseModel):
    kind: str = "KafkaPartitionList"
    metadata: ListMetadata
    data: list[PartitionData]


class AssignedPartition(BaseModel):
    topic_name: str
    partition_id: int


class ConsumerData(BaseModel):
    kind: str = "KafkaConsumer"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    instance_id: str
    client_id: str
    subscription: list[str] = Field(description="Subscribed topics (resolved for a pattern).")
    topic_pattern: str | None = None
    assignments: list[AssignedPartition]


class ConsumerGroupData(BaseModel):
    kind: str = "KafkaConsumerGroup"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    is_simple: bool
    partition_assignor: str
    state: str = Field(description="Stable when it has members, Empty otherwise.")
    generation: int
    consumers: list[ConsumerData]
    lag_summary: Related
    lags: Related


class ConsumerGroupList(BaseModel):
    kind: str = "KafkaConsumerGroupList"
    metadata: ListMetadata
    data: list[ConsumerGroupData]


class ConsumerLag(BaseModel):
    kind: str = "KafkaConsumerLag"
    cluster_id: str
    consumer_group_id: str
    topic_name: str
    partition_id: int
    current_offset: int = Field(description="Committed offset; -1 if never committed.")
    log_end_offset: int
    lag: int
    consumer_id: str
    instance_id: str
    client_id: str


class ConsumerLagList(BaseModel):
    kind: str = "KafkaConsumerLagList"
    metadata: ListMetadata
    data: list[ConsumerLag]


class LagSummary(BaseModel):
    kind: str = "KafkaConsumerGroupLagSummary"
    cluster_id: str
    consumer_group_id: str
    max_lag: int
    total_lag: int
    max_lag_topic_name: str | None
    max_lag_partition_id: int | None
    # brokergate's: partitions whose commit is past the log end (negative lag), which neither
    # max_lag nor total_lag shows while another partition is behind or caught up
    partitions_past_end: int = 0


# --- ACLs (Confluent's /v3/clusters/{cluster_id}/acls) -----------------------------------

AclResourceType = Literal["TOPIC", "GROUP", "CLUSTER"]
AclPatternType = Literal["LITERAL", "PREFIXED"]
AclOperation = Literal[
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
]
AclPermission = Literal["ALLOW", "DENY"]


class CreateAclRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resource_type: AclResourceType
    resource_name: str = Field(min_length=1, max_length=255)
    pattern_type: AclPatternType
    principal: str = Field(min_length=6, max_length=260, pattern=r"^User:.+$")
    host: str = Field("*", min_length=1, max_length=255)
    operation: AclOperation
    permission: AclPermission


class AclData(BaseModel):
    kind: str = "KafkaAcl"
    metadata: ListMetadata
    cluster_id: str
    resource_type: AclResourceType
    resource_name: str
    pattern_type: AclPatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission


class AclList(BaseModel):
    kind: str = "KafkaAclList"
    metadata: ListMetadata
    data: list[AclData]
