"""Prometheus metrics, one registry per application (so tests can build many apps)."""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class _OfTopic(Protocol):
    @property
    def topic(self) -> str: ...


class Metrics:
    """The gateway's instruments; the API layer and the workers update them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "brokergate_http_requests",
            "HTTP requests served",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "brokergate_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.coded_bodies = Counter(
            "brokergate_http_coded_bodies",
            "Request bodies decoded and answers coded (Content-Encoding), by coding",
            ["direction", "coding"],
            registry=self.registry,
        )
        self.coded_bytes = Counter(
            "brokergate_http_coded_bytes",
            "Bytes of those bodies on the wire (coded) and as read or written (plain)",
            ["direction", "coding", "form"],
            registry=self.registry,
        )
        self.produced_records = Counter(
            "brokergate_produced_records", "Records appended", ["topic"], registry=self.registry
        )
        self.produced_bytes = Counter(
            "brokergate_produced_bytes",
            "Record bytes appended (keys, values and headers)",
            ["topic"],
            registry=self.registry,
        )
        self.consumed_records = Counter(
            "brokergate_consumed_records",
            "Records delivered to consumer instances",
            ["topic"],
            registry=self.registry,
        )
        self.expired_instances = Counter(
            "brokergate_expired_instances",
            "Consumer instances removed after their timeout",
            registry=self.registry,
        )
        self.retention_segments = Counter(
            "brokergate_retention_deleted_segments",
            "Log segments deleted by retention",
            registry=self.registry,
        )
        self.throttled = Counter(
            "brokergate_throttled_requests",
            "Requests refused with 429 by a quota, by the kind of bucket that refused",
            ["quota"],
            registry=self.registry,
        )
        self.quota_unchecked = Counter(
            "brokergate_quota_unchecked_requests",
            "Requests let through without a quota check because the quota store was unavailable",
            registry=self.registry,
        )
        self.instances = Gauge(
            "brokergate_consumer_instances", "Live consumer instances", registry=self.registry
        )

    def count_consumed(self, polled: Iterable[tuple[_OfTopic, Sized]]) -> None:
        """Count the records a read handed out, by topic (``polled``: each partition's records)."""
        counter = self.consumed_records
        for tp, records in polled:
            counter.labels(tp.topic).inc(len(records))
