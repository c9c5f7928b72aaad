"""How a gateway divides its file descriptors at start: client connections beside the log's files.

The gateway first raises its soft ``ulimit -n`` to the hard limit (``raise_fd_limit``);
what it then may open is divided once, here, and said in one line of the start-up log.
``FDS_OTHERS`` are kept for the backends' sockets and the like and, with the embedded log,
``sealed_fds`` for reading sealed segments. Of what is left, client connections get at most
half (``CONNECTIONS_PARTS``): the partitions' files (3 a partition) always have the other half.
With a Kafka log no partition file is opened here, and connections may have all of it.

``max_connections`` above its share is lowered to it, whether it is the default or configured:
a gateway that kept room for 1000 connections under a ``ulimit -n`` of 1024 would refuse every
topic. At 1024 with the defaults: 256 kept, 384 for connections, 384 for partitions' files.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from typing import Final

from service.adapters.embedded.log.fds import FDS_OTHERS, FDS_PER_PARTITION, fd_limit
from service.settings import Settings

log = logging.getLogger("brokergate")

# Connections get at most one of this many equal parts of what the reserve leaves, when the log
# keeps files here: the partitions' files have the rest.
CONNECTIONS_PARTS: Final = 2


@dataclass(frozen=True, slots=True)
class DescriptorPlan:
    """The division of ``limit`` descriptors: ``connections`` (what the server admits, at most
    ``wanted``, the ``max_connections`` setting), ``sealed`` for reading sealed segments (None:
    a log that keeps no files here), ``FDS_OTHERS``, and the rest for the partitions' files."""

    limit: int
    raised_from: int
    wanted: int
    connections: int
    sealed: int | None
    explicit: bool

    @property
    def reserved(self) -> int:
        return FDS_OTHERS + (self.sealed or 0)

    @property
    def files(self) -> int:
        """What is left for the partitions' files."""
        return max(self.limit - self.reserved - self.connections, 0)

    @property
    def lowered(self) -> bool:
        return self.connections < self.wanted

    @property
    def warns(self) -> bool:
        """Whether the line is a warning: a configured ``max_connections`` that does not fit."""
        return self.explicit and self.lowered

    def limit_for(self, connections: int) -> int:
        """The ``ulimit -n`` at which ``connections`` would be admitted whole."""
        return self.reserved + connections * (CONNECTIONS_PARTS if self.sealed is not None else 1)

    def line(self) -> str:
        """The start-up log's one line about descriptors."""
        raised = (
            f"raised from {self.raised_from}" if self.raised_from != self.limit else "already the hard limit"
        )
        if self.lowered:
            whose = "configured" if self.explicit else "the default"
            cause = (
                f"max_connections={self.wanted} ({whose}) lowered to fit: connections get at most "
                f"{'half' if self.sealed is not None else 'all'} of what the {self.reserved} kept leave; "
                f"a ulimit -n of {self.limit_for(self.wanted)} admits {self.wanted}"
            )
        else:
            cause = "max_connections"
        parts = [
            f"{self.connections} for client connections ({cause})",
            f"{FDS_OTHERS} for the backends and others",
        ]
        if self.sealed is not None:
            parts += [
                f"{self.sealed} for reading sealed segments",
                f"{self.files} for the partitions' files ({FDS_PER_PARTITION} a partition)",
            ]
        return f"file descriptors: ulimit -n {self.limit} ({raised}); " + ", ".join(parts)


def plan_descriptors(
    limit: int, raised_from: int, max_connections: int, *, explicit: bool, sealed_fds: int | None
) -> DescriptorPlan:
    """Divide ``limit`` descriptors: ``sealed_fds`` is the embedded log's cache bound (None for a
    log that keeps no files here); ``explicit``: whether ``max_connections`` was configured."""
    room = max(limit - FDS_OTHERS - (sealed_fds or 0), 0)
    share = room // CONNECTIONS_PARTS if sealed_fds is not None else room
    connections = max(min(max_connections, share), 1)
    return DescriptorPlan(limit, raised_from, max_connections, connections, sealed_fds, explicit)


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (as Go programs do at start):
    systemd and shells start services at a soft limit of 1024 whatever the hard one allows.
    Returns (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # e.g. an unlimited hard limit the kernel caps lower
            return soft, soft
    return soft, hard


def fit_descriptors(settings: Settings) -> tuple[Settings, DescriptorPlan]:
    """Raise the soft limit, divide it (``plan_descriptors``), and return ``settings`` with the
    ``max_connections`` the server will admit, and the plan, whose line the caller logs
    (``say_descriptors``) once the rest of the configuration is known to be good, so that a bad
    setting is still told in one line."""
    before, _ = raise_fd_limit()
    plan = plan_descriptors(
        fd_limit(),
        before,
        settings.max_connections,
        explicit="max_connections" in settings.model_fields_set,
        sealed_fds=settings.sealed_fds if settings.log == "embedded" else None,
    )
    fitted = settings.model_copy(update={"max_connections": plan.connections}) if plan.lowered else settings
    return fitted, plan


def say_descriptors(plan: DescriptorPlan) -> None:
    """The plan's one line of the log: a warning when a configured ``max_connections`` did not fit."""
    log.log(logging.WARNING if plan.warns else logging.INFO, "%s", plan.line())
