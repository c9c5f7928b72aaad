"""The limits a connection meets before any request: how many may be open, per address, and
how long a TLS handshake may take (``server.GatewayProtocol`` applies them).

Collaborators: ``core.fair`` (the fair share of ``MAX_CONNECTIONS`` each address gets) and
uvicorn's ``forwarded_allow_ips`` (the proxies, whose connections carry many clients).
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass

from service.core.fair import FairCounter, FairShare
from service.errors import BackendUnavailable

__all__ = ["SPARE_FDS", "ConnectionLimits", "Proxies"]

# A connection refused when fewer descriptors than this are left is answered and closed at once:
# what is left is for accepting (which must never fail with EMFILE) and for the connections served.
SPARE_FDS = 64


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What a server's connections are held to: the ``max_connections``,
    ``max_connections_per_address``, ``header_timeout_ms``, ``max_header_bytes`` and
    ``tls_handshake_timeout_ms`` settings."""

    max_connections: int
    per_address: int
    header_timeout_s: float
    max_header_bytes: int
    handshake_timeout_s: float

    def counter(self) -> FairCounter:
        """The connections of one server: counted from their accept, per address."""
        share = FairShare(self.max_connections, self.per_address, "connections")
        return FairCounter(share, lambda reason: BackendUnavailable(f"{reason}; retry shortly."))


@dataclass(frozen=True, slots=True)
class Proxies:
    """The addresses trusted to speak for many clients (uvicorn's ``forwarded_allow_ips``): their
    connections count against ``MAX_CONNECTIONS`` but not against one address's share, which
    would otherwise be every client's behind them. Their clients' requests are shared out by
    the address each forwards, or by principal (``core.fair.holder_of``)."""

    everyone: bool
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @classmethod
    def of(cls, spec: list[str] | str) -> Proxies:
        items = [i.strip() for i in (spec.split(",") if isinstance(spec, str) else spec) if i.strip()]
        networks = []
        for item in items:
            with contextlib.suppress(ValueError):  # not an address (a socket path): no TCP peer is it
                networks.append(ipaddress.ip_network(item, strict=False))
        return cls("*" in items, tuple(networks))

    def __contains__(self, host: str) -> bool:
        if self.everyone:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)
