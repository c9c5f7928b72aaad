"""Partition assignment strategies for consumer groups: pure functions, no I/O.

``GroupManager`` (``service.core.groups``) resolves each member's subscription
to topic names, reads the partition counts, and calls ``assign`` with the
previous generation's assignment; it stores the result through the
``ConsumerGroups`` port. Three strategies, named as clients know them:

- ``range``: Kafka's ``RangeAssignor``. Per topic, the subscribed members in
  sorted order take consecutive ranges; the first ``n % members`` take one
  extra.
- ``roundrobin``: Kafka's ``RoundRobinAssignor``. All partitions in
  (topic, partition) order are dealt to the sorted members in a cycle,
  skipping members not subscribed to the partition's topic.
- ``balanced`` (default; ``sticky`` and Kafka's sticky assignors map here):
  keeps every member's still-valid previous partitions, then moves as few as
  needed until no member could take a partition from one holding two or more
  more than it (directly or through a chain of members), which for members
  with the same subscriptions means counts differ by at most one.

Every result lists every member (possibly with ``[]``), and the same inputs
always give the same output, whichever replica computes it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, deque
from collections.abc import Collection, Mapping

from .models import TopicPartition

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "assign", "normalize_strategy"]

DEFAULT_STRATEGY = "balanced"

# Short names as Kafka's protocol calls them, plus the Java class names that
# clients put in ``partition.assignment.strategy``.
_ALIASES: dict[str, str] = {
    "range": "range",
    "roundrobin": "roundrobin",
    "round_robin": "roundrobin",
    "balanced": "balanced",
    "sticky": "balanced",
    "cooperative-sticky": "balanced",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "balanced",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "balanced",
}

STRATEGIES: frozenset[str] = frozenset(_ALIASES)

Assignment = dict[str, list[TopicPartition]]


def normalize_strategy(strategy: str) -> str:
    """The canonical name (``range``, ``roundrobin``, ``balanced``) of ``strategy``.

    Raises ``ValueError`` for an unknown name; the caller turns that into a
    client error.
    """
    name = strategy.strip()
    canonical = _ALIASES.get(name) or _ALIASES.get(name.lower())
    if canonical is None:
        known = ", ".join(sorted(_ALIASES))
        raise ValueError(f"unknown partition assignment strategy {strategy!r} (known: {known})")
    return canonical


def assign(
    strategy: str,
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    previous: Mapping[str, Collection[TopicPartition]] | None = None,
) -> Assignment:
    """Assign the partitions of the subscribed topics to the members.

    ``subscriptions`` maps member id to the topic names it is subscribed to
    (already resolved from patterns); topics missing from
    ``partitions_per_topic`` are ignored. ``previous`` is only used by the
    balanced strategy. Each member's list is sorted.
    """
    canonical = normalize_strategy(strategy)
    subs = {member: _existing(topics, partitions_per_topic) for member, topics in subscriptions.items()}
    if canonical == "range":
        result = _range(subs, partitions_per_topic)
    elif canonical == "roundrobin":
        result = _roundrobin(subs, partitions_per_topic)
    else:
        result = _balanced(subs, partitions_per_topic, previous or {})
    for tps in result.values():
        tps.sort()
    return result


def _existing(topics: Collection[str], counts: Mapping[str, int]) -> frozenset[str]:
    return frozenset(t for t in topics if counts.get(t, 0) > 0)


def _subscribers(subs: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    """Topic -> its subscribers in sorted order, for topics in sorted order."""
    by_topic: dict[str, list[str]] = {}
    for member in sorted(subs):
        for topic in subs[member]:
            by_topic.setdefault(topic, []).append(member)
    return {t: by_topic[t] for t in sorted(by_topic)}


def _range(subs: Mapping[str, frozenset[str]], counts: Mapping[str, int]) -> Assignment:
    result: Assignment = {member: [] for member in subs}
    for topic, members in _subscribers(subs).items():
        n = counts[topic]
        per_member, extra = divmod(n, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            result[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return result


def _roundrobin(subs: Mapping[str, frozenset[str]], counts: Mapping[str, int]) -> Assignment:
    result: Assignment = {member: [] for member in subs}
    members = sorted(subs)
    if not members:
        return result
    cursor = 0
    for topic in _subscribers(subs):
        for p in range(counts[topic]):
            # Like Kafka's CircularIterator: advance past members not subscribed
            # to this topic; someone is, since the topic came from a subscription.
            while topic not in subs[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            result[members[cursor]].append(TopicPartition(topic, p))
            cursor = (cursor + 1) % len(members)
    return result


def _balanced(
    subs: Mapping[str, frozenset[str]],
    counts: Mapping[str, int],
    previous: Mapping[str, Collection[TopicPartition]],
) -> Assignment:
    owned: dict[str, set[TopicPartition]] = {member: set() for member in subs}
    owner: dict[TopicPartition, str] = {}

    # 1. Keep what is still valid. A partition claimed by two members (a race
    #    between generations) stays with the first in sorted order.
    for member in sorted(previous):
        if member not in subs:
            continue
        topics = subs[member]
        for tp in sorted(previous[member]):
            if tp.topic in topics and 0 <= tp.partition < counts[tp.topic] and tp not in owner:
                owner[tp] = member
                owned[member].add(tp)
    kept = {member: frozenset(tps) for member, tps in owned.items()}

    # 2. Hand out the rest to the least loaded eligible member (ties: sorted
    #    order). Topics with the fewest subscribers go first, so their
    #    partitions are not crowded out by ones that could go anywhere.
    subscribers = _subscribers(subs)
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        free = [p for p in range(counts[topic]) if TopicPartition(topic, p) not in owner]
        if not free:
            continue
        heap = [(len(owned[m]), m) for m in subscribers[topic]]
        heapq.heapify(heap)
        for p in free:
            load, member = heap[0]
            tp = TopicPartition(topic, p)
            owner[tp] = member
            owned[member].add(tp)
            heapq.heapreplace(heap, (load + 1, member))

    # 3. Rebalance by moving one partition at a time from a member to one
    #    holding at least two fewer, possibly through a chain of members
    #    (each passing one partition on) when their subscriptions differ.
    #    Every move lowers the sum of squared counts, so this terminates.
    loads = _Loads(subs, subscribers, owned, kept)
    while loads.move_one():
        pass
    return {member: list(tps) for member, tps in owned.items()}


class _Loads:
    """The balanced strategy's working state: who holds what, and which topics each member holds."""

    __slots__ = ("held", "kept", "owned", "subs", "subscribers")

    def __init__(
        self,
        subs: Mapping[str, frozenset[str]],
        subscribers: Mapping[str, list[str]],
        owned: dict[str, set[TopicPartition]],
        kept: Mapping[str, frozenset[TopicPartition]],
    ) -> None:
        self.subs = subs
        self.subscribers = subscribers
        self.owned = owned
        # What each member kept from the previous generation: handing over a
        # partition it was only just given costs no stickiness.
        self.kept = kept
        self.held: dict[str, Counter[str]] = {m: Counter(tp.topic for tp in tps) for m, tps in owned.items()}

    def move_one(self) -> bool:
        """Perform one improving move (direct or along a chain); False when balanced."""
        owned = self.owned
        if not owned:
            return False
        lowest = min(len(tps) for tps in owned.values())
        donors = [m for m in owned if len(owned[m]) >= lowest + 2]
        if not donors:
            return False
        # Most loaded first (ties: sorted order), so no partition moves twice.
        # The full sort is only needed when the first donor cannot give.
        first = min(donors, key=lambda m: (-len(owned[m]), m))
        hopeless: set[str] = set()
        for donor in itertools.chain([first], sorted(donors, key=lambda m: (-len(owned[m]), m))):
            if donor in hopeless:
                continue
            path, reached = self._shortest_path(donor)
            if path is None:
                # Everyone reachable from here holds at least len(donor) - 1
                # and donors come in descending order: none of them can find a
                # receiver either (what they reach, this donor reaches too).
                hopeless |= reached
                continue
            for giver, taker in itertools.pairwise(path):
                self._hand_over(giver, taker)
            return True
        return False

    def _hand_over(self, giver: str, taker: str) -> None:
        topics = self.subs[taker]
        candidates = [tp for tp in self.owned[giver] if tp.topic in topics]
        fresh = [tp for tp in candidates if tp not in self.kept[giver]]
        tp = max(fresh or candidates)
        self.owned[giver].remove(tp)
        self.owned[taker].add(tp)
        held = self.held[giver]
        held[tp.topic] -= 1
        if not held[tp.topic]:
            del held[tp.topic]
        self.held[taker][tp.topic] += 1

    def _shortest_path(self, donor: str) -> tuple[list[str] | None, set[str]]:
        """Members donor -> ... -> receiver, each able to take one of the previous one's partitions.

        The receiver holds at least two fewer than the donor. Breadth first,
        so the fewest partitions move; at equal length the least loaded
        receiver, then the first in sorted order, wins. Also returns the
        members reached.
        """
        owned = self.owned
        limit = len(owned[donor]) - 2
        parent: dict[str, str | None] = {donor: None}
        expanded: set[str] = set()  # a topic's subscribers need adding only once
        frontier = [donor]
        while frontier and len(expanded) < len(self.subscribers):
            level: list[str] = []
            for member in frontier:
                for topic in sorted(self.held[member].keys() - expanded):
                    expanded.add(topic)
                    for candidate in self.subscribers[topic]:
                        if candidate not in parent:
                            parent[candidate] = member
                            level.append(candidate)
            receivers = [m for m in level if len(owned[m]) <= limit]
            if receivers:
                receiver: str | None = min(receivers, key=lambda m: (len(owned[m]), m))
                path: deque[str] = deque()
                while receiver is not None:
                    path.appendleft(receiver)
                    receiver = parent[receiver]
                return list(path), set(parent)
            frontier = sorted(level)
        return None, set(parent)
