"""The ZooKeeper connection of the coordinator: one kazoo client, bridged to asyncio.

``ZooKeeperSession`` owns the ``KazooClient``. kazoo is synchronous and
thread-based, so nothing here blocks the event loop: ``start``/``stop`` run in
a worker thread with a bounded wait, and every request uses kazoo's ``*_async``
call, whose result is bridged to an asyncio future (``call``). Watch and
connection-state callbacks, which kazoo runs in its own threads, come back into
the loop with ``loop.call_soon_threadsafe``.

Failure policy, in one place: a request made while the connection is down
fails at once, and one in flight is given at most ``request_timeout_ms``; both
raise ``BackendUnavailable`` (503 with Retry-After) naming the servers, so no
caller ever hangs on an outage. Meanwhile kazoo keeps reconnecting in the
background (at most one second apart), with the same session if ZooKeeper
still holds it and with a new one after expiry; the coordinator watches the
session id to re-create its ephemeral znodes.

With ``DigestCredentials`` the session authenticates as the gateway (again on every
reconnection, as kazoo does) and creates every znode with their ACL; a request that the
ACL of someone else's znode refuses is a ``BackendError`` that says so.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionDropped,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
    SessionMovedError,
    ZookeeperStoppedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.recipe.lock import Lock

from service.errors import BackendError, BackendUnavailable

from .paths import encode_name
from .security import DigestCredentials

log = logging.getLogger(__name__)

SCHEME = "zookeeper://"
_HOST_RE = re.compile(r"(\[[0-9a-fA-F:.]+\]|[^\s:/\[\],]+)(?::(\d{1,5}))?")
# Connection loss in all its kazoo spellings (ConnectionClosedError is a SessionExpiredError).
_UNAVAILABLE = (
    ConnectionDropped,
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
    SessionMovedError,
    ZookeeperStoppedError,
    KazooTimeoutError,
)
# Between two reconnection attempts: short, so service resumes soon after ZooKeeper does.
_RECONNECT_MAX_DELAY_S = 1.0

AsyncOp = Callable[[KazooClient], IAsyncResult]
StateListener = Callable[[KazooState], None]


@dataclass(frozen=True, slots=True)
class ZooKeeperURL:
    """``zookeeper://host:port[,host:port...][/chroot]``, taken apart."""

    servers: str
    chroot: str

    @classmethod
    def parse(cls, url: str) -> ZooKeeperURL:
        """Raise ``ValueError`` with a one-line reason if ``url`` is not a usable ZooKeeper URL."""
        if not url.startswith(SCHEME):
            raise ValueError(f"coordinator URL {url!r} does not start with {SCHEME}")
        hosts, slash, chroot = url[len(SCHEME) :].partition("/")
        servers = [h.strip() for h in hosts.split(",")]
        for server in servers:
            match = _HOST_RE.fullmatch(server)
            if match is None or (match.group(2) is not None and not 0 < int(match.group(2)) < 65536):
                raise ValueError(f"coordinator URL {url!r}: {server!r} is not host[:port]")
        parts = [p for p in chroot.split("/") if p] if slash else []
        for part in parts:
            if encode_name(part) != part:
                raise ValueError(f"coordinator URL {url!r}: {part!r} cannot be a ZooKeeper path element")
        return cls(",".join(servers), "".join(f"/{p}" for p in parts))


class ZooKeeperSession:
    """One kazoo client: bounded start and stop, asyncio-bridged requests, errors translated.

    Collaborators: the coordinator's stores (``GroupStore``, ``OffsetStore``),
    ``NodeRegistry`` and ``LeaderElection`` issue their requests through
    ``call``; the coordinator registers a state listener to learn about
    disconnections and new sessions.
    """

    def __init__(
        self,
        url: ZooKeeperURL,
        *,
        session_timeout_ms: int,
        connect_timeout_ms: int,
        request_timeout_ms: int,
        credentials: DigestCredentials | None = None,
    ) -> None:
        self.url = url
        self.credentials = credentials
        self.session_timeout_ms = session_timeout_ms
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[StateListener] = []

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect within the connect timeout, or raise a one-line ``BackendUnavailable``."""
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        credentials = self.credentials
        client = KazooClient(
            hosts=self.url.servers,
            timeout=self.session_timeout_ms / 1000,
            connection_retry={
                "max_tries": -1,
                "delay": 0.05,
                "backoff": 2,
                "max_delay": _RECONNECT_MAX_DELAY_S,
            },
            # kazoo sends auth_data on every connection, and gives default_acl to every create,
            # ensure_path and transaction create that names no ACL (none here does)
            auth_data=credentials.auth_data if credentials else None,
            default_acl=credentials.acl() if credentials else None,
        )
        try:
            # kazoo.start waits (in its thread) at most the timeout, then stops the client itself.
            await asyncio.to_thread(client.start, self._connect_timeout_s)
        except Exception as exc:
            raise BackendUnavailable(
                f"Cannot reach ZooKeeper at {self.url.servers} within "
                f"{self._connect_timeout_s * 1000:.0f} ms ({type(exc).__name__})."
            ) from exc
        client.add_listener(self._on_state)
        self._client = client

    async def stop(self) -> None:
        """Close the session (ZooKeeper drops its ephemeral znodes at once). Idempotent."""
        client, self._client = self._client, None
        if client is None:
            return
        client.remove_listener(self._on_state)

        def close() -> None:
            try:
                client.stop()
            finally:
                client.close()

        # kazoo may wait for its connection thread for up to the session timeout; we need not.
        try:
            async with asyncio.timeout(self._connect_timeout_s + 1):
                await asyncio.shield(asyncio.to_thread(close))
        except (TimeoutError, KazooException) as exc:
            log.warning("ZooKeeper client did not close cleanly: %r", exc)

    # --- state -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether requests can be sent now (a cheap read of kazoo's own flag)."""
        client = self._client
        return client is not None and bool(client.connected)

    @property
    def request_timeout_s(self) -> float:
        return self._request_timeout_s

    @property
    def session_id(self) -> int | None:
        client = self._client
        ids = client.client_id if client is not None else None
        return int(ids[0]) if ids else None

    def add_listener(self, listener: StateListener) -> None:
        """Call ``listener(state)`` in the event loop on every connection state change."""
        self._listeners.append(listener)

    def _on_state(self, state: KazooState) -> None:
        # kazoo's connection thread: must not block, so hand over to the loop.
        for listener in self._listeners:
            self._to_loop(listener, state)

    def watcher(self, callback: Callable[[], None]) -> Callable[[WatchedEvent], None]:
        """A kazoo watch function that runs ``callback()`` in the event loop when the watch fires."""

        def watch(event: WatchedEvent) -> None:
            self._to_loop(callback)

        return watch

    def watch(self, path: str, callback: Callable[[], None]) -> None:
        """Run ``callback()`` in the event loop once the znode at ``path`` is created, changed or
        deleted, or at once if the watch could not be set (it may have changed meanwhile).

        The request that sets the watch is queued now, before any request sent after this call,
        and ZooKeeper answers a session's requests in order: a change after those is seen. While
        the connection is down nothing is set (a request then fails at once anyway).
        """
        client = self._client
        if client is None or not client.connected:
            return

        def settled(result: IAsyncResult) -> None:
            if not result.successful():
                log.debug("watching %s failed: %r", path, result.exception)
                self._to_loop(callback)

        client.exists_async(path, watch=self.watcher(callback)).rawlink(settled)

    def _to_loop(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    # --- requests --------------------------------------------------------------------

    def unavailable(self, why: str) -> BackendUnavailable:
        return BackendUnavailable(f"ZooKeeper at {self.url.servers} {why}; retry later.")

    async def call(self, op: AsyncOp, *, what: str, expect: tuple[type[Exception], ...] = ()) -> Any:
        """Run ``op(client)`` (a kazoo ``*_async`` call) and return its result.

        Exceptions in ``expect`` (e.g. ``NoNodeError``) reach the caller as kazoo
        raised them; an unreachable ZooKeeper becomes ``BackendUnavailable``
        within the request timeout, anything else ``BackendError``.
        """
        client = self._client
        if client is None:
            raise BackendUnavailable("The ZooKeeper coordinator is not running.")
        if not client.connected:
            # kazoo would queue the request until it reconnects: an unbounded wait.
            raise self.unavailable("is unreachable")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: IAsyncResult) -> None:
            if future.done():  # the caller gave up (timeout or cancellation)
                return
            if result.successful():
                future.set_result(result.value)
            else:
                future.set_exception(result.exception)

        # rawlink callbacks run in kazoo's completion thread.
        op(client).rawlink(lambda result: self._to_loop(settle, result))
        try:
            async with asyncio.timeout(self._request_timeout_s):
                return await future
        except TimeoutError:
            raise self.unavailable(
                f"did not answer ({what}) within {self._request_timeout_s * 1000:.0f} ms; "
                "a change it carried may still be applied"
            ) from None
        except expect:
            raise
        except _UNAVAILABLE as exc:
            raise self.unavailable(f"was lost during {what} ({type(exc).__name__})") from exc
        except NoAuthError as exc:
            who = f"user {self.credentials.username!r}" if self.credentials else "a client without a user"
            raise BackendError(
                f"ZooKeeper refused {what}: a znode's ACL does not allow {who} (NoAuthError); every "
                "replica needs the same zookeeper_username and zookeeper_password."
            ) from exc
        except KazooException as exc:
            raise BackendError(f"ZooKeeper refused {what}: {type(exc).__name__}.") from exc

    def lock_recipe(self, path: str, identifier: str) -> Lock:
        """kazoo's ``Lock`` recipe on ``path`` (its calls block: run them in a thread)."""
        client = self._client
        if client is None:
            raise BackendUnavailable("The ZooKeeper coordinator is not running.")
        if not client.connected:
            raise self.unavailable("is unreachable")
        return client.Lock(path, identifier)

    async def exists(self, path: str, *, what: str) -> ZnodeStat | None:
        return cast("ZnodeStat | None", await self.call(lambda c: c.exists_async(path), what=what))

    async def ensure_path(self, path: str, *, what: str) -> None:
        """Create ``path`` and its missing parents (persistent, empty)."""
        await self.call(lambda c: c.ensure_path_async(path), what=what)
