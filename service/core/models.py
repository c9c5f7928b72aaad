"""Value types shared by the core and every adapter.

Nothing here does I/O. Records carry raw bytes: the embedded formats
(binary, json, string) are an API concern and live in ``service.wire``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from itertools import repeat, starmap
from typing import Any, Final, Literal, TypeVar, overload

from .acl import ANONYMOUS
from .rules import record_size

Header = tuple[str, bytes | None]
T = TypeVar("T")

OffsetReset = Literal["earliest", "latest", "none"]
InstanceKind = Literal["consumer", "share"]
# The v2 API's embedded formats: how keys and values travel in JSON. The plain ones carry bytes
# (base64, JSON text, UTF-8 text); the schema ones carry JSON stored in the schema-registry wire format.
PlainFormat = Literal["binary", "json", "string"]
SchemaFormat = Literal["avro", "jsonschema", "protobuf"]
EmbeddedFormat = Literal["binary", "json", "string", "avro", "jsonschema", "protobuf"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class NewRecord:
    """A record on its way into the log; the log assigns its offset."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None  # ms since epoch; None means "now" at append time


class NewRecords(Sequence[NewRecord]):
    """Records on their way into the log, as columns: what a produce request parses into, and
    what the producer and every log's ``append`` take.

    ``values`` always; ``keys``, ``headers`` and ``timestamps`` only when some record has one
    (None: no record has): the most common produce of all is values alone, and a log encodes
    those from the values (the embedded log's ``encode_batch``) where a ``NewRecord`` per value
    would cost more than decoding its base64. Anyone else sees ``NewRecord``s, made as asked for.
    Never changed once built.
    """

    __slots__ = ("headers", "keys", "timestamps", "values")

    def __init__(
        self,
        values: list[bytes | None],
        keys: list[bytes | None] | None = None,
        headers: list[tuple[Header, ...]] | None = None,
        timestamps: list[int | None] | None = None,
    ) -> None:
        self.values = values
        self.keys = keys
        self.headers = headers
        self.timestamps = timestamps

    @classmethod
    def of(cls, records: Sequence[NewRecord]) -> NewRecords:
        """``records`` as columns (``NewRecords`` already are)."""
        if isinstance(records, NewRecords):
            return records
        return cls.trimmed(
            [r.value for r in records],
            [r.key for r in records],
            [r.headers for r in records],
            [r.timestamp for r in records],
        )

    @classmethod
    def trimmed(
        cls,
        values: list[bytes | None],
        keys: list[bytes | None],
        headers: list[tuple[Header, ...]],
        timestamps: list[int | None],
    ) -> NewRecords:
        """The records of these columns, each column left out that no record uses."""
        n = len(values)
        return cls(
            values,
            None if keys.count(None) == n else keys,
            None if headers.count(()) == n else headers,
            None if timestamps.count(None) == n else timestamps,
        )

    @property
    def values_alone(self) -> bool:
        """Whether every record is a value and nothing else (no key, headers nor timestamp)."""
        return self.keys is None and self.headers is None and self.timestamps is None

    def take(self, indexes: Sequence[int]) -> NewRecords:
        """The records at ``indexes``, in that order (a partition's share of a request)."""

        def pick(column: list[T] | None) -> list[T] | None:
            return None if column is None else [column[i] for i in indexes]

        return NewRecords(
            [self.values[i] for i in indexes], pick(self.keys), pick(self.headers), pick(self.timestamps)
        )

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> NewRecord: ...

    @overload
    def __getitem__(self, index: slice) -> NewRecords: ...

    def __getitem__(self, index: int | slice) -> NewRecord | NewRecords:
        if isinstance(index, slice):
            return self.take(range(len(self.values))[index])
        return NewRecord(
            None if self.keys is None else self.keys[index],
            self.values[index],
            () if self.headers is None else self.headers[index],
            None if self.timestamps is None else self.timestamps[index],
        )

    def rows(self) -> Iterator[tuple[bytes | None, bytes | None, tuple[Header, ...], int | None]]:
        """Each record's key, value, headers and timestamp, a column left out read as none."""
        n = len(self.values)
        return zip(
            repeat(None, n) if self.keys is None else self.keys,
            self.values,
            repeat((), n) if self.headers is None else self.headers,
            repeat(None, n) if self.timestamps is None else self.timestamps,
            strict=True,
        )

    def __iter__(self) -> Iterator[NewRecord]:
        return starmap(NewRecord, self.rows())


@dataclass(frozen=True, slots=True)
class Record:
    """A record as stored, with its offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    @property
    def size(self) -> int:
        """The record's size as ``max_bytes`` budgets and byte quotas count it (``rules.record_size``)."""
        return record_size(self.key, self.value, self.headers)


RecordFactory = Callable[[int, int, bytes | None, bytes | None, tuple[Header, ...]], Record]


def _record_factory() -> RecordFactory:
    """The fastest correct way to build a ``Record``, for the logs' decoders.

    A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, about half of the per-record cost of a fetch. When
    ``Record`` is exactly the five-slot dataclass below, its slot descriptors
    are set directly; if the model ever changes shape, the plain constructor is used.
    """
    names = ("offset", "timestamp", "key", "value", "headers")
    plain = hasattr(Record, "__post_init__") or tuple(f.name for f in fields(Record)) != names
    if plain or getattr(Record, "__slots__", None) != names:
        return Record
    new = object.__new__
    s_off, s_ts, s_key, s_val, s_hdr = (Record.__dict__[n].__set__ for n in names)

    def make(
        offset: int, ts: int, key: bytes | None, value: bytes | None, headers: tuple[Header, ...]
    ) -> Record:
        r = new(Record)
        s_off(r, offset)
        s_ts(r, ts)
        s_key(r, key)
        s_val(r, value)
        s_hdr(r, headers)
        return r

    return make


make_record: Final[RecordFactory] = _record_factory()


class RecordColumns(Sequence[Record]):
    """Records of one partition as parallel lists, each record's size beside it: what every log's
    fetch answers, and what every reader of fetched records takes.

    Columns, not a ``Record`` per record: decoding a fetched batch into lists costs a few appends
    a record, where building an object per record cost as much again as reading the batch. To
    those that want records it is a sequence of ``Record`` (one is built when indexed or
    iterated); the paths that pass records on walk the lists: the renderer
    (``service.wire.records``), the fetch budget, the poll's allowance and the weights.

    Two columns are there only when a step added them: ``decoded``, the keys' and values' JSON
    a schema decoded (``schemas.serde``: the schema formats render it, not the bytes), and
    ``deliveries``, how many times a share group has delivered each record. A log's decoder fills
    the lists; after that they never change: a slice or ``+`` is a new one. ``headers`` holds a
    tuple per record (``()`` for none).
    """

    __slots__ = ("decoded", "deliveries", "headers", "keys", "offsets", "sizes", "timestamps", "values")

    def __init__(
        self,
        offsets: list[int],
        timestamps: list[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        headers: list[tuple[Header, ...]],
        sizes: list[int],
        *,
        decoded: tuple[list[Any], list[Any]] | None = None,
        deliveries: list[int] | None = None,
    ) -> None:
        self.offsets = offsets
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.headers = headers
        self.sizes = sizes  # each record's ``Record.size``, computed once by the decoder
        self.decoded = decoded
        self.deliveries = deliveries

    @classmethod
    def empty(cls) -> RecordColumns:
        return cls([], [], [], [], [], [])

    @classmethod
    def of(cls, records: Iterable[Record], sizes: list[int] | None = None) -> RecordColumns:
        """The columns of ``records`` (each record's fields and size; ``sizes`` when the caller
        already counted them)."""
        rows = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
        return cls(
            [row[0] for row in rows],
            [row[1] for row in rows],
            [row[2] for row in rows],
            [row[3] for row in rows],
            [row[4] for row in rows],
            sizes if sizes is not None else [record_size(row[2], row[3], row[4]) for row in rows],
        )

    def with_decoded(self, keys: list[Any], values: list[Any]) -> RecordColumns:
        """These records with the JSON a schema decoded of each key and value."""
        return self._like(slice(None), decoded=(keys, values), deliveries=self.deliveries)

    def with_deliveries(self, deliveries: list[int]) -> RecordColumns:
        """These records with how many times a share group has delivered each."""
        return self._like(slice(None), decoded=self.decoded, deliveries=deliveries)

    @property
    def weight(self) -> int:
        """What the records weigh together (``Record.size``), as budgets, credit and quotas count it."""
        return sum(self.sizes)

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> RecordColumns: ...

    def __getitem__(self, index: int | slice) -> Record | RecordColumns:
        if isinstance(index, slice):
            decoded = self.decoded
            return self._like(
                index,
                decoded=None if decoded is None else (decoded[0][index], decoded[1][index]),
                deliveries=None if self.deliveries is None else self.deliveries[index],
            )
        return make_record(
            self.offsets[index],
            self.timestamps[index],
            self.keys[index],
            self.values[index],
            self.headers[index],
        )

    def _like(
        self, index: slice, *, decoded: tuple[list[Any], list[Any]] | None, deliveries: list[int] | None
    ) -> RecordColumns:
        return RecordColumns(
            self.offsets[index],
            self.timestamps[index],
            self.keys[index],
            self.values[index],
            self.headers[index],
            self.sizes[index],
            decoded=decoded,
            deliveries=deliveries,
        )

    def __iter__(self) -> Iterator[Record]:
        return map(make_record, self.offsets, self.timestamps, self.keys, self.values, self.headers)

    def __add__(self, other: RecordColumns) -> RecordColumns:
        """The records of both, in order (the plain columns: a fetch's, before any step added one)."""
        if not other.offsets:
            return self
        if not self.offsets:
            return other
        return RecordColumns(
            self.offsets + other.offsets,
            self.timestamps + other.timestamps,
            self.keys + other.keys,
            self.values + other.values,
            self.headers + other.headers,
            self.sizes + other.sizes,
        )

    def __eq__(self, other: object) -> bool:  # equal to any sequence of the same records, as a list is
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return f"RecordColumns({list(self)!r})"


# What a read hands out, partition by partition in fetch order: the records a log fetched, or the
# leading part of them, or those a schema format decoded (with their JSON).
Polled = list[tuple[TopicPartition, RecordColumns]]


@dataclass(frozen=True, slots=True)
class PartitionData:
    """What a fetch returns for one partition: its records, and where its log starts and ends.

    ``out_of_range``: the position fetched from is outside the partition's offsets, before its
    log start (retention removed it) or past its log end; no records, answered at once (Kafka's
    OFFSET_OUT_OF_RANGE): the reader moves, by ``auto.offset.reset`` or by its own rule. The log
    end itself is in range: the next record's offset."""

    records: RecordColumns
    high_watermark: int
    log_start_offset: int
    out_of_range: bool = False


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a group member asked for: a topic list or a regex pattern."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None


@dataclass(slots=True)
class Member:
    """A consumer instance as a member of its group."""

    member_id: str
    subscription: Subscription
    strategy: str = "balanced"
    joined_ms: int = 0
    principal: str = ANONYMOUS  # whose instance: a pattern covers only topics it may DESCRIBE


@dataclass(slots=True)
class GroupState:
    """One generation of a group's assignment.

    ``owned_since`` records, per partition, the generation since which its
    current owner has held it continuously; a member whose view is older than
    that must not trust (or commit) positions it had for the partition.
    ``topics`` is the partition count per subscribed topic that the
    assignment was computed from, so a topic gaining partitions (or a new topic
    matching a pattern) is detected by comparing it with the live metadata.
    ``version`` is the adapter's compare-and-set token.
    """

    generation: int = 0
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    owned_since: dict[TopicPartition, int] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)
    version: int = 0

    def owner_of(self, tp: TopicPartition) -> str | None:
        for member, tps in self.assignment.items():
            if tp in tps:
                return member
        return None


@dataclass(slots=True)
class InstanceConfig:
    """The configuration a consumer instance was created with."""

    format: EmbeddedFormat = "binary"
    auto_offset_reset: OffsetReset = "latest"
    auto_commit: bool = False
    fetch_min_bytes: int = 1
    request_timeout_ms: int = 1000
    instance_timeout_ms: int = 300_000
    strategy: str = "balanced"
    kind: InstanceKind = "consumer"  # a share group's consumer ("share") reads as KIP-932's do


@dataclass(slots=True)
class InstanceState:
    """Everything a consumer instance needs between two requests.

    ``positions`` is the next offset to fetch per partition; it is also what an
    empty-body commit commits (Kafka's "all consumed"). ``generation`` is the
    group generation the positions belong to. ``version`` is the adapter's
    compare-and-set token: two concurrent polls of one instance can never both
    advance the same positions.
    """

    group: str
    name: str
    config: InstanceConfig
    created_ms: int
    last_seen_ms: int
    subscription: Subscription | None = None
    manual: list[TopicPartition] | None = None
    generation: int = 0
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    version: int = 0
    owner: str = ANONYMOUS  # the principal that created it: nobody else reaches it

    @property
    def expires_ms(self) -> int:
        return self.last_seen_ms + self.config.instance_timeout_ms


@dataclass(frozen=True, slots=True)
class IdempotentResult:
    """What an idempotency key holds: the request's fingerprint and, once done, its response."""

    fingerprint: str
    response: bytes | None  # None while the first request with the key is still running
