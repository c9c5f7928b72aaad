"""The one table of names and limits: what each rule accepts, and what each refusal answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core import rules
from service.core.models import Record, TopicPartition
from service.errors import ErrorCode, GatewayError

TP = TopicPartition

# (rule, value, the error code it answers, or None when the value is accepted)
TABLE: list[tuple[Callable[[Any], object], Any, int | None]] = [
    # topics: Kafka's rule, which is also a safe file name
    (rules.check_topic, "orders", None),
    (rules.check_topic, "a.b_c-D9", None),
    (rules.check_topic, "x" * 249, None),
    (rules.check_topic, "x" * 250, ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, ".", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "..", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "...", None),
    (rules.check_topic, "a/b", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "../etc", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "x\x00y", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, "ünï", ErrorCode.INVALID_TOPIC),
    (rules.check_topic, 7, ErrorCode.INVALID_TOPIC),
    # groups: any text, as in Kafka, up to what every coordinator stores
    (rules.check_group, "g", None),
    (rules.check_group, "../../escape", None),
    (rules.check_group, "a\x00b", None),
    (rules.check_group, "ünïcødé 🚀", None),
    (rules.check_group, "x" * 255, None),
    (rules.check_group, "x" * 256, ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_group, "", ErrorCode.INVALID_CONSUMER_CONFIG),
    # consumer instances: named as groups are, and one URL path segment (the end of base_uri)
    (rules.check_instance, "rest-consumer-1", None),
    (rules.check_instance, "x" * 255, None),
    (rules.check_instance, "x" * 256, ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_instance, "any name? #1 ü", None),
    (rules.check_instance, "../x", ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_instance, "a/b", ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_instance, ".", ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_instance, "..", ErrorCode.INVALID_CONSUMER_CONFIG),
    (rules.check_instance, "...", None),
    (rules.check_instance, "", ErrorCode.INVALID_CONSUMER_CONFIG),
    # Idempotency-Key header values
    (rules.check_idempotency_key, "k-1", None),
    (rules.check_idempotency_key, "x" * 255, None),
    (rules.check_idempotency_key, "x" * 256, ErrorCode.INVALID_REQUEST),
    (rules.check_idempotency_key, "a b", ErrorCode.INVALID_REQUEST),
    (rules.check_idempotency_key, "é", ErrorCode.INVALID_REQUEST),
    # record header names
    (lambda name: rules.check_header_name(name, "records[0].headers[0]"), "h", None),
    (lambda name: rules.check_header_name(name, "records[0].headers[0]"), "", ErrorCode.CONVERSION),
    (lambda name: rules.check_header_name(name, "records[0].headers[0]"), None, ErrorCode.CONVERSION),
    # partition counts, growth and replication
    (rules.check_partition_count, 1, None),
    (rules.check_partition_count, rules.MAX_PARTITIONS, None),
    (rules.check_partition_count, rules.MAX_PARTITIONS + 1, ErrorCode.INVALID_TOPIC_CONFIG),
    (rules.check_partition_count, 0, ErrorCode.INVALID_TOPIC_CONFIG),
    (rules.check_partition_count, True, ErrorCode.INVALID_TOPIC_CONFIG),
    (rules.check_partition_count, "3", ErrorCode.INVALID_TOPIC_CONFIG),
    (lambda total: rules.check_partition_growth("t", 3, total), 4, None),
    (lambda total: rules.check_partition_growth("t", 3, total), 3, ErrorCode.INVALID_TOPIC_CONFIG),
    (lambda total: rules.check_partition_growth("t", 3, total), 2, ErrorCode.INVALID_TOPIC_CONFIG),
    (
        lambda total: rules.check_partition_growth("t", 3, total),
        rules.MAX_PARTITIONS + 1,
        ErrorCode.INVALID_TOPIC_CONFIG,
    ),
    (rules.check_replication_factor, -1, None),
    (rules.check_replication_factor, 3, None),
    (rules.check_replication_factor, 0, ErrorCode.INVALID_TOPIC_CONFIG),
    (rules.check_replication_factor, -2, ErrorCode.INVALID_TOPIC_CONFIG),
    (rules.check_replication_factor, 1 << 15, ErrorCode.INVALID_TOPIC_CONFIG),
    # committed offsets: what a commit may hold
    (rules.check_offsets, {TP("t", 0): 0}, None),
    (rules.check_offsets, {TP("t", rules.MAX_PARTITION): rules.MAX_OFFSET}, None),
    (rules.check_offsets, {TP("t", 0): -1}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("t", 0): rules.MAX_OFFSET + 1}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("t", -1): 0}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("t", 0): True}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("", 0): 1}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("x" * 256, 0): 1}, ErrorCode.INVALID_REQUEST),
    (rules.check_offsets, {TP("odd topic/ü", 0): 1}, None),  # Kafka's coordinator takes any name
]


@pytest.mark.parametrize(("rule", "value", "code"), TABLE)
def test_each_rule_accepts_or_answers_its_one_code(
    rule: Callable[[Any], object], value: Any, code: int | None
) -> None:
    if code is None:
        assert rule(value) == (list(value.items()) if isinstance(value, dict) else value)
        return
    with pytest.raises(GatewayError) as refused:
        rule(value)
    assert refused.value.error_code == code and refused.value.http_status == 422
    assert refused.value.message  # says what was wrong


def test_the_predicates_agree_with_the_checks() -> None:
    for rule, valid in ((rules.check_topic, rules.valid_topic), (rules.check_group, rules.valid_group)):
        for r, value, code in TABLE:
            if r is rule:
                assert valid(value) is (code is None), value
    assert rules.valid_offset_key(TP("..", 0)) and not rules.valid_offset_key(TP("", 0))


headers = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3)


@given(key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=20), hs=headers)
def test_one_size_for_a_record_everywhere(key: bytes | None, value: bytes | None, hs: list[Any]) -> None:
    record = Record(0, 0, key, value, tuple(hs))
    expected = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in hs)
    assert record.size == rules.record_size(key, value, tuple(hs)) == expected
    assert rules.record_bytes([record, record]) == 2 * expected
