"""Which options ``format("brokergate")`` takes in each use, and the check that refuses the others.

A read, a stream, a write and a streaming write each take their own options
(``READ``, ``STREAM_READ``, ``WRITE``, ``STREAM_WRITE``); an option outside
its use's would otherwise be ignored without a word, a misspelt
``maxOffsetPerTrigger`` reading the whole backlog in one micro-batch. So
``check_names`` refuses it as the gateway refuses an unknown field, naming
the closest option of the use (``did you mean maxOffsetsPerTrigger?``), or
saying where an option of another use belongs.

Spark's option keys are case-insensitive and reach the data source in lower
case, and Spark passes options of its own (``path`` for ``load(path)`` and
``save(path)``, a streaming write's ``checkpointLocation``): those are never
refused. Pure, no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from .credentials import SETTINGS
from .decode_options import OPTIONS as DECODE_OPTIONS
from .offsets import OptionError

# Spark's own options: what load(path) / save(path) / start(path) and a streaming write pass.
SPARK_OPTIONS: Final = frozenset({"path", "paths", "checkpointlocation"})
# Spark's internal options (``__partition_columns``, ...) start with this.
SPARK_INTERNAL: Final = "__"

_SOURCE: Final = (
    "log",
    "topic",
    "coordinator",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxRecordsPerPartition",
    *DECODE_OPTIONS,
    *(s.option for s in SETTINGS),
)
_ENDING: Final = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
_STREAM: Final = ("maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss")
_SINK: Final = (
    "gateway",
    "gatewayUsername",
    "gatewayPassword",
    "gatewayPasswordFile",
    "gatewayToken",
    "gatewayTokenFile",
    "gatewayCaFile",
    "gatewayCertFile",
    "gatewayKeyFile",
    "gatewayCompression",
    "topic",
    "format",
    "keySchemaId",
    "keySchema",
    "valueSchemaId",
    "valueSchema",
    "maxRecordsPerRequest",
    "maxBytesPerRequest",
    "deliveryTimeoutMs",
)
_READS: Final = "an option of reads (spark.read and spark.readStream), not of a write"
_WRITES: Final = "an option of writes (df.write and writeStream), not of a read"
_STREAMS: Final = "an option of spark.readStream; a batch read reads from its start to its end offsets"


@dataclass(frozen=True, slots=True)
class Use:
    """One use of the data source: what it is called, its options, and why it refuses some others."""

    what: str  # as a message names it: spark.readStream.format("brokergate")
    names: tuple[str, ...]
    refused: Mapping[str, str] = field(default_factory=dict)  # lowercased option -> why, for known others

    def check(self, options: Iterable[str]) -> None:
        """Raise ``OptionError`` for the first option (sorted) this use does not take."""
        known = {name.lower(): name for name in self.names}
        for key in sorted(str(k).lower() for k in options):
            if key in known or key in SPARK_OPTIONS or key.startswith(SPARK_INTERNAL):
                continue
            if key in self.refused:
                raise OptionError(f"{_spelt(key)}: {self.refused[key]}")
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
            hint = f"; did you mean {known[close[0]]}?" if close else ""
            raise OptionError(f"{key}: {self.what} has no such option{hint}")


_ALL_NAMES: Final = {name.lower(): name for name in (*_SOURCE, *_ENDING, *_STREAM, *_SINK, "writeId")}


def _spelt(key: str) -> str:
    return _ALL_NAMES.get(key, key)


def _why(names: Iterable[str], reason: str) -> dict[str, str]:
    return {name.lower(): reason for name in names}


# A use's own options are never refused: ``topic`` is a read's and a write's.
_READ_REFUSES: Final = _why((*_ENDING, *_STREAM), _STREAMS) | _why((*_SINK, "writeId"), _WRITES)
_WRITE_REFUSES: Final = _why((*_SOURCE, *_ENDING, *_STREAM), _READS)

READ: Final = Use('spark.read.format("brokergate")', (*_SOURCE, *_ENDING), _READ_REFUSES)
STREAM_READ: Final = Use(
    'spark.readStream.format("brokergate")',
    (*_SOURCE, *_STREAM),
    _READ_REFUSES | _why(_ENDING, "a stream has no end; leave it out (or read with spark.read)"),
)
# What a read's ``schema()`` takes: it cannot tell a read from a stream, both of which call it.
ANY_READ: Final = Use('a read of format("brokergate")', (*_SOURCE, *_ENDING, *_STREAM), _READ_REFUSES)
WRITE: Final = Use('df.write.format("brokergate")', (*_SINK, "writeId"), _WRITE_REFUSES)
STREAM_WRITE: Final = Use(
    'writeStream.format("brokergate")',
    _SINK,
    _WRITE_REFUSES | _why(["writeId"], "a batch write's name; a stream's writes are named by its checkpoint"),
)
