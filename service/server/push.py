"""Push subscriptions composed: the service the API uses, and the worker that delivers them.

Each deliverer gets a ``ShareGroups`` of its own, with the share limits its subscription's spec
makes (a record's lock twice the deadline, its delivery limit the attempts, parked for its
dead-letter copy when the subscription has a dead-letter topic), over the coordinator's states.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.adapters.push_sender import HttpPushSender
from service.api.gateway import Gateway
from service.core.ports import Coordinator, Log
from service.core.push.deliverer import Deliverer
from service.core.push.ports import PushSender
from service.core.push.runner import PushRunner
from service.core.push.service import PushService
from service.core.push.spec import PushSubscription
from service.core.push.stats import PushStats
from service.core.shares.dead_letters import DeadLetters
from service.core.shares.delivery import ShareLimits
from service.core.shares.service import ShareGroups
from service.settings import Settings
from service.wire.records import records_array
from workers.push import PushWorker


def push_service(
    settings: Settings, log: Log, coordinator: Coordinator, shares: ShareGroups, sender: HttpPushSender
) -> PushService:
    destinations = settings.push_destinations()
    return PushService(coordinator, shares, log, destinations, sender, limits=settings.push_limits())


def push_worker(gateway: Gateway, settings: Settings, sender: PushSender) -> PushWorker:
    """The worker delivering, from this replica, the subscriptions whose lock it takes."""
    coordinator = gateway.coordinator

    def deliverer(sub: PushSubscription, stats: PushStats) -> Deliverer:
        spec = sub.spec
        topic = spec.dead_letter_topic
        dead_letters = DeadLetters(gateway.log, gateway.topics, topic) if topic else None
        limits = ShareLimits(
            max_in_flight=settings.share_partition_max_record_locks,
            delivery_limit=spec.max_attempts,
            lock_ms=spec.lock_ms,
            park=dead_letters is not None,
        )
        shares = ShareGroups(
            gateway.log,
            coordinator,
            limits=limits,
            dead_letters=dead_letters,
            draining=gateway.draining,
            shared=settings.coordinator != "embedded",
        )
        return Deliverer(
            sub,
            shares=shares,
            topics=gateway.topics,
            sender=sender,
            destinations=gateway.push.destinations,
            render=records_array,
            serde=gateway.serde,
            dead_letters=dead_letters,
            stats=stats,
            access=gateway.access if gateway.access.enabled else None,
        )

    runner = PushRunner(coordinator, coordinator, deliverer, gateway.push.stats)
    collector = PushMetrics(gateway.push.stats)
    registry = gateway.metrics.registry
    registry.register(collector)  # until the worker stops: an app started again registers its own
    return PushWorker(
        runner, settings.push_refresh_ms, gateway.push_changed, on_stop=lambda: registry.unregister(collector)
    )


class PushMetrics(Collector):
    """``brokergate_push_*``: each subscription this replica delivers, read at every scrape."""

    def __init__(self, stats: Mapping[str, PushStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        label = ["subscription"]
        counters = {
            "delivered_records": ("Records a 2xx settled", "delivered"),
            "requests": ("Push requests sent", "requests"),
            "failed_requests": ("Push requests that did not settle their records", "failures"),
            "dead_lettered_records": ("Records given up on (dead-lettered)", "dead_lettered"),
        }
        gauges = {
            "in_flight_requests": ("Push requests in flight", "in_flight"),
            "held_records": ("Records a deliverer holds, not yet settled", "held"),
            "backlog_records": ("Records not yet settled, as of the deliverer's last look", "backlog"),
        }
        stats = list(self._stats.items())
        for name, (text, field) in counters.items():
            family = CounterMetricFamily(f"brokergate_push_{name}", text, labels=label)
            for sub, s in stats:
                family.add_metric([sub], getattr(s, field))
            yield family
        for name, (text, field) in gauges.items():
            gauge = GaugeMetricFamily(f"brokergate_push_{name}", text, labels=label)
            for sub, s in stats:
                gauge.add_metric([sub], getattr(s, field))
            yield gauge
        rate = GaugeMetricFamily(
            "brokergate_push_delivery_rate", "Records settled a second, the last 10 s", labels=label
        )
        errors = GaugeMetricFamily(
            "brokergate_push_last_error_timestamp_seconds", "When the last request failed", labels=label
        )
        now = time.monotonic()
        for sub, s in stats:
            rate.add_metric([sub], s.rate(now))
            if s.last_error_ms is not None:
                errors.add_metric([sub], s.last_error_ms / 1000)
        yield rate
        yield errors
