"""The Redis connection of the sessions adapter: URL, client, bounded start, failure policy.

``RedisConnection`` owns one ``redis.asyncio.Redis`` client (and so its
connection pool) and is the only place that decides what a Redis failure
means, so ``RedisSessions`` stays about sessions.

Failure policy, in one place:

- Every request goes through ``run``, which bounds it by
  ``connect_timeout + socket_timeout`` on top of redis-py's own socket
  timeouts, so no caller ever waits longer than that on an outage, whether
  Redis is down (refused at once), unreachable (connect timeout) or hung
  (read timeout).
- A dropped connection is retried once at once (``Retry`` with no backoff,
  connection errors only): it is what a pooled connection looks like after
  Redis restarted. Timeouts are not retried, which would only double the
  wait. The writes that are not idempotent, ``CREATE`` and ``SAVE``,
  recognise their own retry by a token (see ``scripts``).
- What stays unreachable becomes ``BackendUnavailable`` (503 with
  Retry-After) naming the server; anything else Redis refuses becomes
  ``BackendError``. No redis-py exception leaves this module.
- Nothing needs to be done to recover: the pool opens new connections on
  the next request once Redis answers again.
- Credentials and TLS are checked when the connection is built
  (``RedisSecurity``); at start, refused credentials and a failed TLS
  handshake are reported at once, since waiting fixes neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    NoPermissionError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import BackendError, BackendUnavailable, GatewayError

from ..tls import failure_reason
from . import keys
from .scripts import ALL as ALL_SCRIPTS
from .security import RedisSecurity

log = logging.getLogger(__name__)

__all__ = ["RedisConnection", "RedisURL"]

SCHEME: Final = "redis://"
TLS_SCHEME: Final = "rediss://"
DEFAULT_PORT: Final = 6379
CLIENT_NAME: Final = "brokergate-sessions"
# Between two attempts of start(): short, so a Redis starting alongside the gateway is seen soon.
_START_RETRY_S: Final = 0.05
# Replies that mean "not now" rather than "never": a retry later can succeed.
_TRANSIENT_REPLIES: Final = ("LOADING", "BUSY", "OOM", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")

# Failures a retry later can get past (BusyLoadingError is a ConnectionError; the builtin
# TimeoutError, which asyncio.timeout raises, is an OSError).
_UNAVAILABLE: Final = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    ReadOnlyError,
    TryAgainError,
    ClusterDownError,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RedisURL:
    """``redis[s]://[[user]:password@]host[:port][/db]``, taken apart; neither ``str()`` nor the
    repr shows the password. ``rediss://`` is Redis over TLS."""

    host: str
    port: int = DEFAULT_PORT
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False

    @classmethod
    def parse(cls, url: str) -> RedisURL:
        """Raise ``ValueError`` with a one-line reason if ``url`` is not a usable Redis URL."""
        if not url.startswith((SCHEME, TLS_SCHEME)):
            raise ValueError(f"sessions URL {url!r} does not start with {SCHEME} or {TLS_SCHEME}")
        parts = urlsplit(url)
        shown = cls._redacted(url)
        if parts.query or parts.fragment:
            raise ValueError(
                f"sessions URL {shown!r}: options go in BROKERGATE_REDIS_* settings, not the URL"
            )
        if not parts.hostname:
            raise ValueError(f"sessions URL {shown!r} has no host")
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise ValueError(f"sessions URL {shown!r} has an invalid port") from None
        path = parts.path.strip("/")
        if path and not (path.isdigit() and path.isascii()):
            raise ValueError(f"sessions URL {shown!r}: the path must be a database number, not {path!r}")
        return cls(
            host=parts.hostname,
            port=port,
            db=int(path) if path else 0,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            tls=url.startswith(TLS_SCHEME),
        )

    @staticmethod
    def _redacted(url: str) -> str:
        scheme, _, rest = url.partition("://")
        creds, at, hostpart = rest.rpartition("@")
        return f"{scheme}://***@{hostpart}" if at and creds else url

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{TLS_SCHEME if self.tls else SCHEME}{host}:{self.port}/{self.db}"


class RedisConnection:
    """One redis-py client with bounded start and stop, and the translation of its failures.

    Collaborators: ``RedisSessions`` issues every request through ``run``;
    the scripts of ``scripts`` are loaded by ``start``; ``security`` adds the
    gateway's credentials and TLS files to what the URL says (``ValueError``
    here if they do not fit together or a file cannot be loaded).
    """

    def __init__(
        self,
        url: RedisURL,
        *,
        connect_timeout_ms: int,
        socket_timeout_ms: int,
        security: RedisSecurity | None = None,
    ) -> None:
        self.url = url
        self._options = (security or RedisSecurity()).client_options(
            tls=url.tls, url_username=url.username, url_password=url.password
        )
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._socket_timeout_s = socket_timeout_ms / 1000
        # Every path through redis-py (connect, a stale-connection check, send, read) is bounded
        # by one of the two timeouts; this caps their sum as a last resort.
        self.request_bound_s = self._connect_timeout_s + self._socket_timeout_s
        self._client: Redis | None = None

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (waiting at most the connect timeout) and load the scripts.

        Raises a one-line ``BackendUnavailable`` naming the server if Redis
        does not answer in time. Idempotent.
        """
        if self._client is not None:
            return
        client = Redis(
            host=self.url.host,
            port=self.url.port,
            db=self.url.db,
            **self._options,  # username, password, TLS
            socket_timeout=self._socket_timeout_s,
            socket_connect_timeout=self._connect_timeout_s,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            client_name=CLIENT_NAME,
            encoding_errors=keys.TEXT_ERRORS,
        )
        try:
            await self._wait_ready(client)
        except BaseException:
            await client.aclose()
            raise
        self._client = client

    async def _wait_ready(self, client: Redis) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout_s
        last: BaseException | None = None
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    await client.ping()
                    for script in ALL_SCRIPTS:
                        await script.load(client)
                return
            except (AuthenticationError, AuthorizationError, NoPermissionError) as exc:
                # Waiting does not fix credentials: say so at once.
                raise BackendUnavailable(f"Redis at {self.url} refused the credentials ({exc}).") from exc
            except (RedisError, OSError, TimeoutError) as exc:  # not up yet, or still loading its data
                if (refused := _tls_failure(exc)) is not None:  # nor does it fix a certificate
                    raise BackendUnavailable(
                        f"Redis at {self.url} failed the TLS handshake ({failure_reason(refused)})."
                    ) from exc
                last = exc
            await asyncio.sleep(min(_START_RETRY_S, max(0.0, deadline - loop.time())))
        why = type(last).__name__ if last is not None else "no answer"
        raise BackendUnavailable(
            f"Cannot reach Redis at {self.url} within {self._connect_timeout_s * 1000:.0f} ms ({why})."
        ) from last

    async def stop(self) -> None:
        """Close the pool's connections; idempotent."""
        client, self._client = self._client, None
        if client is not None:
            # A Redis that is down can make closing fail; there is nothing left to do about it.
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    # --- requests --------------------------------------------------------------------

    async def run(self, op: Callable[[Redis], Awaitable[T]]) -> T:
        """Run ``op`` against the client within the request bound, failures translated."""
        client = self._client
        if client is None:
            raise BackendUnavailable("The Redis sessions store is not running.")
        try:
            async with asyncio.timeout(self.request_bound_s):
                return await op(client)
        except (RedisError, OSError, TimeoutError) as exc:
            raise self.translate(exc) from exc

    def translate(self, exc: BaseException) -> GatewayError:
        """The ``service.errors`` exception that stands for a redis-py (or socket) failure."""
        if isinstance(exc, (AuthenticationError, AuthorizationError, NoPermissionError)):
            return BackendError(f"Redis at {self.url} refused the request ({type(exc).__name__}).")
        if isinstance(exc, _UNAVAILABLE):
            return BackendUnavailable(
                f"Redis at {self.url} is unavailable ({type(exc).__name__}); retry later."
            )
        if isinstance(exc, ResponseError) and str(exc).startswith(_TRANSIENT_REPLIES):
            return BackendUnavailable(f"Redis at {self.url} is busy ({str(exc).split()[0]}); retry later.")
        log.warning("Redis at %s refused a sessions request: %s", self.url, exc)
        return BackendError(f"Redis at {self.url} refused a request ({type(exc).__name__}).")


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` (redis-py wraps it in its ``ConnectionError``), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
