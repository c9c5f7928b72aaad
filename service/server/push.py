"""Push subscriptions composed: the service the API uses, and the worker that delivers them.

Each deliverer gets a ``ShareGroups`` of its own, with the share limits its subscription's spec
makes (a record's lock twice the deadline, its delivery limit the attempts, parked for its
dead-letter copy when the subscription has a dead-letter topic), over the coordinator's states.
"""

from __future__ import annotations

from service.adapters.push_sender import HttpPushSender
from service.api.gateway import Gateway
from service.core.ports import Coordinator, Log
from service.core.push.deliverer import Deliverer, PushStats
from service.core.push.runner import PushRunner
from service.core.push.service import PushService
from service.core.push.spec import PushSubscription
from service.core.shares.dead_letters import DeadLetters
from service.core.shares.delivery import ShareLimits
from service.core.shares.service import ShareGroups
from service.settings import Settings
from service.wire.records import records_array
from workers.push import PushWorker


def push_service(settings: Settings, log: Log, coordinator: Coordinator, shares: ShareGroups) -> PushService:
    return PushService(coordinator, shares, log, settings.push_destinations(), limits=settings.push_limits())


def push_worker(gateway: Gateway, settings: Settings, sender: HttpPushSender) -> PushWorker:
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
    return PushWorker(runner, settings.push_refresh_ms, gateway.push_changed)
