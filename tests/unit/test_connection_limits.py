"""Which peers are proxies trusted to carry many clients (uvicorn's ``forwarded_allow_ips``)."""

from __future__ import annotations

from service.server.connections import Proxies


def test_proxies_are_addresses_and_networks_as_uvicorn_reads_them() -> None:
    proxies = Proxies.of("127.0.0.1, ::1,10.1.0.0/16,/run/gateway.sock")
    assert "127.0.0.1" in proxies and "::1" in proxies and "10.1.200.7" in proxies
    assert "10.2.0.1" not in proxies and "127.0.0.2" not in proxies and "not-an-address" not in proxies
    assert "203.0.113.9" in Proxies.of(["*"])
    assert "127.0.0.1" not in Proxies.of("")
