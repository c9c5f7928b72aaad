"""TLS handshakes through ``brokergate serve`` as a user runs it (its event loop is uvloop's when
installed, not the tests' asyncio): counted from the accept against the address's share, and
bounded in time."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from deploy.local.gateway import GatewayReplica
from deploy.local.security import TlsFiles


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayReplica]:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    files = TlsFiles(cert=tmp_path / "cert.pem", key=tmp_path / "key.pem", ca=tmp_path / "ca.pem")
    leaf.cert_chain_pems[0].write_to_path(str(files.cert))
    leaf.private_key_pem.write_to_path(str(files.key))
    ca.cert_pem.write_to_path(str(files.ca))
    env = {"BROKERGATE_TLS_HANDSHAKE_TIMEOUT_MS": "2000", "BROKERGATE_MAX_CONNECTIONS_PER_ADDRESS": "2"}
    gw = GatewayReplica(tmp_path / "data", env=env, new_session=False, tls=files).start()
    try:
        yield gw
    finally:
        gw.stop()


async def test_a_handshake_never_finished_holds_its_address_share_until_it_is_cut_off(gateway):
    assert gateway.tls is not None
    context = ssl.create_default_context(cafile=str(gateway.tls.ca))

    async def get(source: str) -> bytes:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", gateway.port, ssl=context, server_hostname="127.0.0.1", local_addr=(source, 0)
        )
        writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return raw

    address = ("127.0.0.2", 0)
    stalled = [await asyncio.open_connection("127.0.0.1", gateway.port, local_addr=address) for _ in range(2)]
    stalled[1][1].write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello cut short
    for _ in range(50):  # refused once the gateway has accepted them (at once, unless it is busy)
        refused = await get("127.0.0.2")
        if not refused.startswith(b"HTTP/1.1 200"):
            break
        await asyncio.sleep(0.05)
    assert refused.startswith(b"HTTP/1.1 503") and b'"error_code":50301' in refused, refused
    assert (await get("127.0.0.3")).startswith(b"HTTP/1.1 200")
    for reader, _ in stalled:  # cut off by the gateway once the handshake time is up
        assert await asyncio.wait_for(reader.read(), 10) == b""
    assert (await get("127.0.0.2")).startswith(b"HTTP/1.1 200")
