"""Where push requests may go: the operator's allow-list, and the addresses refused unless it names them.

An allow-list entry is a host, optionally with a scheme and a port::

    hooks.example.com           https to that name, any port
    *.example.com:8443          https to any name under example.com, port 8443
    http://10.0.0.7:8080        http (only where an entry says so) to that address and port
    10.0.0.0/8                  https to any address in that network

A URL is allowed when an entry matches its scheme, host and port. Then, at every delivery, the
name is resolved and each address checked: only a global unicast address may be used unless an
entry names it (an address or a network holding it) — so loopback, private, shared, link-local
(the cloud metadata services) and reserved addresses are refused unless the operator named them.
The sender connects to the address checked, never resolving again, so a name cannot rebind
between the check and the connection.

An empty allow-list allows nothing: push is off until an operator allows destinations.

Pure: resolving is the sender's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from service.errors import InvalidPayload

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class DestinationRefused(InvalidPayload):
    """An endpoint the gateway's destination rules do not allow."""

    default_message = "The endpoint is not an allowed destination."


@dataclass(frozen=True, slots=True)
class Target:
    """An endpoint URL taken apart: what the connection is made to, and what the request asks."""

    scheme: str
    host: str  # lower case, IDNA, no trailing dot; an IPv6 address without brackets
    port: int
    target: str  # path and query, as the request line carries them
    literal: IpAddress | None  # the host, when it is an address

    @property
    def authority(self) -> str:
        """``host[:port]`` as a Host header says it (the port only when not the scheme's)."""
        host = f"[{self.host}]" if self.literal is not None and self.literal.version == 6 else self.host
        return host if DEFAULT_PORTS[self.scheme] == self.port else f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class _Entry:
    scheme: str  # "https" unless the entry names "http"
    name: str | None  # a host name, or "*.suffix"
    network: IpNetwork | None
    port: int | None

    def matches(self, target: Target) -> bool:
        if self.scheme != target.scheme or (self.port is not None and self.port != target.port):
            return False
        if self.network is not None:
            return target.literal is not None and target.literal in self.network
        assert self.name is not None
        if self.name.startswith("*."):
            return target.host.endswith(self.name[1:]) and len(target.host) > len(self.name) - 1
        return target.host == self.name

    def names_address(self, address: IpAddress, port: int) -> bool:
        return self.network is not None and address in self.network and self.port in (None, port)


class Destinations:
    """The allow-list (``push_allowed_destinations``) and the address rules (see the module docstring)."""

    def __init__(self, entries: Iterable[str]) -> None:
        """``ValueError`` naming an entry that is not ``[scheme://]host[:port]`` or a network."""
        self._entries: tuple[_Entry, ...] = tuple(_parse_entry(e) for e in entries)

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def check_url(self, url: str) -> Target:
        """The target of ``url`` if the allow-list allows it; ``DestinationRefused`` saying why not."""
        if not self._entries:
            raise DestinationRefused(
                "Push is off: the gateway allows no destinations (push_allowed_destinations is empty)."
            )
        target = parse_url(url)
        if not any(entry.matches(target) for entry in self._entries):
            raise DestinationRefused(
                f"{target.scheme}://{target.authority} is not in the gateway's allowed destinations."
            )
        if target.literal is not None:
            self.check_address(target, target.literal)
        return target

    def check_address(self, target: Target, address: IpAddress) -> None:
        """``DestinationRefused`` unless ``address`` may be connected to for ``target``."""
        if all(a.is_global and not a.is_multicast for a in _as_reached(address)):
            return
        if any(entry.names_address(address, target.port) for entry in self._entries):
            return
        raise DestinationRefused(
            f"{target.host} is at {address}, a loopback, private, link-local or reserved address that "
            "the allowed destinations do not name."
        )

    def first_allowed(self, target: Target, addresses: Sequence[IpAddress]) -> IpAddress:
        """The first of ``addresses`` that may be connected to; ``DestinationRefused`` if none may."""
        refusal: DestinationRefused | None = None
        for address in addresses:
            try:
                self.check_address(target, address)
            except DestinationRefused as exc:
                refusal = refusal or exc
                continue
            return address
        raise refusal or DestinationRefused(f"{target.host} resolved to no address.")


_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def _as_reached(address: IpAddress) -> list[IpAddress]:
    """``address``, and the IPv4 address it reaches when it carries one (mapped, NAT64, 6to4,
    Teredo): a private one reached through a translator is refused as the private one is."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    carried: list[IpAddress] = [address]
    if address.ipv4_mapped is not None:
        carried.append(address.ipv4_mapped)
    if address in _NAT64:
        carried.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        carried.append(address.sixtofour)
    if address.teredo is not None:
        carried += address.teredo
    return carried


def parse_url(url: str) -> Target:
    """``url`` as a ``Target``; ``DestinationRefused`` if it is not an http(s) URL a push may use."""
    if not isinstance(url, str) or not url.isascii() or not url.isprintable() or " " in url:
        raise DestinationRefused("The endpoint is an absolute http or https URL in printable ASCII.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"The endpoint is not a valid URL: {exc}.") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise DestinationRefused("The endpoint's scheme is http or https.")
    if parts.username is not None or parts.password is not None:
        raise DestinationRefused("The endpoint carries no user or password: use auth 'bearer' instead.")
    host = _host(parts.hostname or "")
    literal = _address(host)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Target(scheme, host, port or DEFAULT_PORTS[scheme], target, literal)


def _host(raw: str) -> str:
    host = raw.lower().rstrip(".")
    if not host or "%" in host:
        raise DestinationRefused("The endpoint names a host (no percent-encoding, no zone).")
    if _address(host) is not None:
        return host
    try:
        return host.encode("idna").decode()
    except UnicodeError:
        raise DestinationRefused(f"The endpoint's host {raw!r} is not a valid name.") from None


def _address(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _parse_entry(text: str) -> _Entry:
    raw = text.strip()
    scheme = "https"
    if "://" in raw:
        given, raw = raw.split("://", 1)
        scheme = given.lower()
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"{text!r}: an allowed destination's scheme is http or https")
    if "/" in raw:  # a network
        try:
            network = ipaddress.ip_network(raw, strict=False)
        except ValueError:
            raise ValueError(f"{text!r} is not a network (address/prefix) of allowed destinations") from None
        return _Entry(scheme, None, network, None)
    host, port = _split_port(raw, text)
    literal = _address(host)
    if literal is not None:
        return _Entry(scheme, None, ipaddress.ip_network(literal), port)
    name = host.lower().rstrip(".")
    label = name[2:] if name.startswith("*.") else name
    if not label or "*" in label or not all(part for part in label.split(".")):
        raise ValueError(f"{text!r} is not a host name, '*.domain', address or network")
    try:
        name = name if name.isascii() else name.encode("idna").decode()
    except UnicodeError:
        raise ValueError(f"{text!r} is not a valid host name") from None
    return _Entry(scheme, name, None, port)


def _split_port(raw: str, text: str) -> tuple[str, int | None]:
    if raw.startswith("["):  # [v6] or [v6]:port
        host, _, rest = raw[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        if rest and port is None:
            raise ValueError(f"{text!r}: a port follows ']:'")
    elif raw.count(":") == 1:
        host, port = raw.split(":")
    else:
        host, port = raw, None
    if port is None:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: a port is 1 to 65535")
    return host, int(port)
