"""Dead-letter copies: a record a share group gave up on, written to a topic of its own.

A record delivered ``delivery_limit`` times without being accepted is archived (KIP-932). With
a dead-letter topic configured (``share_dead_letter_topic``, a name in which ``{group}`` and
``{topic}`` stand for the share group and the record's topic) brokergate also copies it there:
key, value, timestamp and headers as they were, plus headers saying where it came from and why
it was given up::

    dlq.group           the share group
    dlq.topic           the topic, partition and offset it was read from
    dlq.partition
    dlq.offset
    dlq.delivery.count  how many times it was delivered
    dlq.error           the last error text a consumer gave when it released it (if one did)

and, from a push subscription, the headers it adds (``push.*``: see ``push.deliverer``).

The copy goes to the dead-letter topic's partition of the same number (modulo its partition
count), so copies of one partition stay in order. The topic is created with the defaults if it
is missing and topics may be auto-created. When the copy is written is ``ShareGroups``' affair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..acl import GATEWAY
from ..models import Header, NewRecord, Record, TopicPartition
from ..ports import Log
from ..rules import check_topic
from ..topics import TopicService
from .delivery import Exhausted

HEADER_PREFIX = "dlq."


class DeadLetters:
    """Writes dead-letter copies to the topic ``template`` names. Collaborators: the ``Log``, and
    ``TopicService`` (the topic, created if missing and allowed)."""

    def __init__(self, log: Log, topics: TopicService, template: str) -> None:
        self._log = log
        self._topics = topics
        self.template = template

    def topic_for(self, group: str, topic: str) -> str:
        """The dead-letter topic of ``group``'s records of ``topic``; ``InvalidTopic`` if the template
        makes no legal topic name of them."""
        return check_topic(self.template.replace("{group}", group).replace("{topic}", topic))

    async def write(
        self,
        group: str,
        tp: TopicPartition,
        records: Sequence[tuple[Record, Exhausted]],
        extra: Mapping[int, Sequence[Header]] | None = None,
    ) -> None:
        """Copy ``records`` of ``tp`` (each with why it was given up, and the ``extra`` headers of
        its offset) to the dead-letter topic; durable when it returns, as a produce is."""
        if not records:
            return
        info = await self._topics.for_produce(self.topic_for(group, tp.topic), GATEWAY)
        target = TopicPartition(info.name, tp.partition % len(info.partitions))
        more = extra or {}
        copies = [_copy(group, tp, record, why, more.get(record.offset, ())) for record, why in records]
        await self._log.append(target, copies)


def _copy(
    group: str, tp: TopicPartition, record: Record, why: Exhausted, extra: Sequence[Header]
) -> NewRecord:
    headers: list[Header] = [
        *record.headers,
        (HEADER_PREFIX + "group", group.encode("utf-8", "replace")),
        (HEADER_PREFIX + "topic", tp.topic.encode()),
        (HEADER_PREFIX + "partition", str(tp.partition).encode()),
        (HEADER_PREFIX + "offset", str(record.offset).encode()),
        (HEADER_PREFIX + "delivery.count", str(why.deliveries).encode()),
    ]
    if why.error is not None:
        headers.append((HEADER_PREFIX + "error", why.error.encode("utf-8", "replace")))
    headers += extra
    return NewRecord(record.key, record.value, tuple(headers), record.timestamp)
