"""The console tools' pure parts: the consumer's commit after a rebalance, names refused before sending."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from service.client import ClientError, Consumer, GatewayClient, url_path
from service.errors import InvalidConsumerConfig, InvalidTopic
from service.tools import commit_owned

REBALANCED = ClientError(
    409, 40903, "consumer 'c' does not own partition t-1; its offsets were not committed."
)


class FakeConsumer:
    """A group member whose commits the group refuses while they name a partition it does not own."""

    def __init__(self, owned: list[tuple[str, int]], refusal: ClientError = REBALANCED) -> None:
        self.owned = owned
        self.refusal = refusal
        self.committed: list[list[tuple[str, int, int]]] = []
        self.refused: list[list[tuple[str, int, int]]] = []
        self.asked = 0

    def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
        assert offsets is not None
        wanted = list(offsets)
        if any((t, p) not in self.owned for t, p, _ in wanted):
            self.refused.append(wanted)
            raise self.refusal
        self.committed.append(wanted)
        return []

    def assignment(self) -> list[tuple[str, int]]:
        self.asked += 1
        return list(self.owned)


def test_a_commit_of_owned_partitions_is_sent_once(capsys):
    consumer = FakeConsumer([("t", 0), ("t", 1)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.committed == [[("t", 0, 9), ("t", 1, 4)]]
    assert consumer.asked == 0 and capsys.readouterr().err == ""


def test_after_a_rebalance_only_the_partitions_kept_are_committed(capsys):
    consumer = FakeConsumer([("t", 0)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.refused == [[("t", 0, 9), ("t", 1, 4)]]
    assert consumer.committed == [[("t", 0, 9)]]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("brokergate: warning: commit refused after a rebalance:")


def test_when_nothing_is_kept_nothing_more_is_sent(capsys):
    consumer = FakeConsumer([("other", 0)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert consumer.committed == [] and len(consumer.refused) == 1 and consumer.asked == 1
    assert "commit refused after a rebalance" in capsys.readouterr().err


def test_a_commit_refused_while_everything_is_still_owned_is_not_retried_for_ever(capsys):
    class Moving(FakeConsumer):
        def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]:
            self.refused.append(list(offsets or []))
            raise self.refusal  # the group is mid-rebalance: the assignment still lists both

    consumer = Moving([("t", 0), ("t", 1)])
    commit_owned(consumer, {("t", 0): 9, ("t", 1): 4})
    assert len(consumer.refused) == 1 and consumer.asked == 1


@pytest.mark.parametrize(
    "refusal",
    [
        ClientError(409, 40902, "Consumer instance already exists."),  # a 409 that is not a rebalance
        ClientError(404, 40403, "Consumer instance not found."),
        ClientError(0, 0, "cannot reach the gateway"),
    ],
)
def test_other_refusals_are_not_taken_for_a_rebalance(refusal):
    consumer = FakeConsumer([], refusal)
    with pytest.raises(ClientError) as raised:
        commit_owned(consumer, {("t", 0): 9})
    assert raised.value is refusal and consumer.asked == 0


def test_every_path_segment_is_encoded_into_one():
    assert (
        url_path("consumers", "a b/c?d#e%f", "instances", "i")
        == "/consumers/a%20b%2Fc%3Fd%23e%25f/instances/i"
    )
    assert url_path("topics", "..", "partitions", 0) == "/topics/../partitions/0"  # refused by name, not here


def test_the_client_refuses_a_name_before_sending_anything():
    # Nothing listens on port 9: a request would fail with ClientError(0), not with the rule's error.
    with GatewayClient("http://127.0.0.1:9") as client:
        for call in (
            lambda: client.produce("orders/partitions/0", [{"value": "x"}]),
            lambda: client.delete_topic("foo/../orders"),
            lambda: client.set_partitions("..", 3),
            lambda: client.topic("a b"),
            lambda: client.create_topic(""),
        ):
            with pytest.raises(InvalidTopic):
                call()
        for call in (lambda: client.consumer(""), lambda: client.group("g" * 256), lambda: client.lags("")):
            with pytest.raises(InvalidConsumerConfig):
                call()
        with pytest.raises(InvalidConsumerConfig):
            client.consumer("g", name="me/../you")
        with pytest.raises(InvalidConsumerConfig):
            Consumer(client, "g", "../x", "binary")
