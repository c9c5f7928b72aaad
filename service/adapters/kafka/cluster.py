"""``ClusterClient``: bounded request/response with the brokers over aiokafka's low-level client.

The Kafka log's fetches, metadata requests and offset lookups go through one
``aiokafka.client.AIOKafkaClient`` (its connections, API version negotiation
and broker list); this wrapper adds what the gateway needs on top:

* every request has a deadline (``asyncio.timeout``), so a broker that stops
  answering gives ``BackendUnavailable`` instead of a hung HTTP request;
* a node missing from the client's broker list triggers one metadata refresh
  before giving up (a broker that joined since the last refresh);
* requests for "any broker" try the known brokers in random order until one answers;
* metadata requests never ask the broker to auto-create a topic (aiokafka's
  default would, and a describe must not create what it describes);
* a bootstrap that fails while credentials are in play says why (aiokafka only
  logs it): a refused password or certificate, not "unable to bootstrap".

Collaborators: ``errors`` (translation). Used by ``metadata``, ``fetcher`` and ``offsets``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Mapping
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.conn import create_conn
from aiokafka.protocol.metadata import MetadataRequest

from service.errors import BackendUnavailable

from .errors import is_connection_failure, no_broker_answered, translate

log = logging.getLogger(__name__)


class ClusterClient:
    """One low-level aiokafka client with deadlines on every request.

    ``connection_timeout_ms`` is aiokafka's own per-request timeout on the
    socket; it must exceed the longest long-poll a fetch asks the broker for,
    so that a waiting fetch is not mistaken for a dead connection. The
    gateway's own, tighter deadlines are the ``timeout`` arguments.
    ``security`` is the log's shared ``security.client_options`` (empty for PLAINTEXT).
    """

    def __init__(
        self,
        servers: list[str],
        *,
        client_id: str,
        connection_timeout_ms: int,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self._servers = servers
        self._client_id = client_id
        self._connection_timeout_ms = connection_timeout_ms
        self._security = dict(security or {})
        self._client: Any = None

    @property
    def servers(self) -> str:
        return ",".join(self._servers)

    async def start(self) -> None:
        """Connect to a bootstrap server and learn the brokers. Raises aiokafka's errors as they are
        (the caller bounds and words the failure)."""
        client = AIOKafkaClient(
            bootstrap_servers=self._servers,
            client_id=self._client_id,
            request_timeout_ms=self._connection_timeout_ms,
            **self._security,
        )
        try:
            await client.bootstrap()
        except Exception as exc:
            await client.close()
            if self._security and is_connection_failure(exc):
                raise await self._why_not(exc) from exc
            raise
        except BaseException:
            await client.close()
            raise
        self._client = client

    async def _why_not(self, failure: Exception) -> Exception:
        """Why the first bootstrap server refused, asked again on a connection of our own.

        aiokafka logs each server's refusal and raises only "unable to bootstrap"; with
        credentials in play the refusal (SASL, TLS) is what an operator needs to read.
        """
        host, _, port = self._servers[0].rpartition(":")
        try:
            conn = await create_conn(
                host.strip("[]"),
                int(port),
                client_id=self._client_id,
                request_timeout_ms=self._connection_timeout_ms,
                **self._security,
            )
        except Exception as exc:
            # A broker that wants a client certificate ends the handshake with an alert, which
            # aiokafka keeps only as the cause of its "connection closed".
            return exc.__cause__ if isinstance(exc.__cause__, ssl.SSLError) else exc
        conn.close()  # it answered this time: the first failure stands
        return failure

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _require(self) -> Any:
        if self._client is None:
            raise BackendUnavailable("The Kafka log is not connected.")
        return self._client

    def broker_ids(self) -> list[int]:
        """The broker ids the client currently knows (from its last metadata)."""
        client = self._require()
        return [b.nodeId for b in client.cluster.brokers()]

    def refresh_soon(self) -> None:
        """Ask aiokafka to refresh its broker list in the background (after a connection failure)."""
        if self._client is not None:
            self._client.force_metadata_update()

    async def send(
        self, node_id: int, request: Any, *, timeout: float, what: str, long_poll: bool = False
    ) -> Any:
        """Send ``request`` to broker ``node_id``: its response, or a ``GatewayError`` after ``timeout`` s.

        ``long_poll`` sends it on a second connection to the broker, kept for the end watch's long
        fetches: Kafka answers one connection's requests in order, so there they hold nothing back.
        """
        client = self._require()
        group = ConnectionGroup.COORDINATION if long_poll else ConnectionGroup.DEFAULT
        try:
            async with asyncio.timeout(timeout):
                if client.cluster.broker_metadata(node_id) is None:
                    await client.force_metadata_update()
                return await client.send(node_id, request, group=group)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_connection_failure(exc):
                self.refresh_soon()
            raise translate(exc, what) from exc

    async def send_any(self, request: Any, *, timeout: float, what: str) -> Any:
        """Send ``request`` to any broker that answers (random order); bounded by ``timeout`` s.

        Each broker gets an even share of the time left, the last one all of it: a broker that
        takes connections but does not answer (frozen, overloaded) costs its share, not the whole
        deadline, while the others might have answered at once.
        """
        client = self._require()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        nodes = self.broker_ids()
        random.shuffle(nodes)
        last: BaseException | None = None
        for tried, node_id in enumerate(nodes):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining / (len(nodes) - tried)):
                    return await client.send(node_id, request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_connection_failure(exc) or isinstance(exc, TimeoutError):  # another may answer
                    last = exc
                    continue
                self.refresh_soon()
                raise translate(exc, what) from exc
        self.refresh_soon()
        if last is None:
            last = no_broker_answered(self.servers)
        raise translate(last, what) from last

    async def metadata(self, topics: list[str] | None, *, timeout: float, what: str) -> Any:
        """A MetadataResponse for ``topics`` (None: every topic, []: none, only brokers and cluster id)."""
        request = MetadataRequest(topics, allow_auto_topic_creation=False)
        return await self.send_any(request, timeout=timeout, what=what)
