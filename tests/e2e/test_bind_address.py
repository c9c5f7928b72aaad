"""Where `brokergate serve` listens, as a user starts it: with authentication off and no `--host`,
on loopback only (as Redis's protected mode keeps a server without a password to its machine),
saying so in one start-up line; on every interface when the operator asks for it (`--host
0.0.0.0`, `BROKERGATE_HOST`), warned in one line, or when clients must sign in.

What a socket listens on is read from the kernel's table (/proc/net/tcp and tcp6), so no test
connects to an address other than 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx
import pytest

from service.security.users import add_user
from tests.e2e.gateway_process import GatewayProcess

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
LOOPBACK_ONLY = "authentication is off, so listening on 127.0.0.1 only"
EXPOSED = "authentication is off and --host is 0.0.0.0"


def listening_on(port: int) -> set[str]:
    """The local addresses of the sockets that listen on TCP ``port`` on this machine."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != _LISTEN or int(hex_port, 16) != port:
                continue
            raw = bytes.fromhex(address)
            # each 32-bit word of the address is in the host's (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(str(ipaddress.ip_address(words)))
    return found


def _lines_about_auth(gw: GatewayProcess) -> list[str]:
    return [line for line in gw.output().splitlines() if "authentication is off" in line]


def test_without_authentication_or_host_it_listens_on_loopback_only_and_says_so(tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "data", host=None) as gw:
        assert listening_on(gw.port) == {"127.0.0.1"}
        assert httpx.get(f"{gw.url}/topics", timeout=10).status_code == 200
        lines = _lines_about_auth(gw)
        assert len(lines) == 1 and LOOPBACK_ONLY in lines[0] and "INFO" in lines[0], lines
        assert "--host 0.0.0.0" in lines[0] and "--auth" in lines[0]


@pytest.mark.parametrize("how", ["flag", "setting"])
def test_every_interface_without_authentication_only_when_asked_and_warned(tmp_path: Path, how: str) -> None:
    if how == "flag":
        gw = GatewayProcess(tmp_path / "data", host="0.0.0.0")
    else:
        gw = GatewayProcess(tmp_path / "data", host=None, env={"BROKERGATE_HOST": "0.0.0.0"})
    with gw:
        assert listening_on(gw.port) == {"0.0.0.0"}
        assert httpx.get(f"{gw.url}/topics", timeout=10).status_code == 200
        lines = _lines_about_auth(gw)
        assert len(lines) == 1 and EXPOSED in lines[0] and "WARNING" in lines[0], lines
        assert f"port {gw.port}" in lines[0]


def test_an_explicit_loopback_host_is_served_without_a_line(tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "data", host="127.0.0.1") as gw:
        assert listening_on(gw.port) == {"127.0.0.1"}
        assert _lines_about_auth(gw) == []


def test_with_authentication_and_no_host_it_listens_on_every_interface(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_user(data / "users", "alice", "alice-pw")
    with GatewayProcess(data, "--auth", "basic", host=None) as gw:
        assert listening_on(gw.port) == {"0.0.0.0"}
        assert httpx.get(f"{gw.url}/topics", timeout=10).status_code == 401
        assert httpx.get(f"{gw.url}/topics", auth=("alice", "alice-pw"), timeout=10).status_code == 200
        assert _lines_about_auth(gw) == []
