"""Named locks shared by every replica: kazoo's ``Lock`` recipe under ``/brokergate/locks``.

A contender is an ephemeral sequential znode under ``/brokergate/locks/{name}``; the lowest
holds the lock. When the holder's session ends (the replica stopped, died, or was cut off past
the session timeout) ZooKeeper deletes its znode and the next contender holds the lock: a lock
is never kept by a replica that is gone.

kazoo's recipe blocks its caller, so ``acquire`` and ``release`` run in worker threads and the
event loop only awaits them; the waiters of one process queue on an ``asyncio.Lock`` first, so
that one thread at most per lock name waits in kazoo (waiters must not use up the threads a
release needs). An acquire its caller gives up (cancelled) is cancelled in kazoo
too, and released should it have won meanwhile. A release that cannot reach ZooKeeper goes on in
its thread, kazoo retrying it, until it can, or until the session ends, which releases the lock
all the same; the caller waits for it at most one request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from kazoo.exceptions import CancelledError as KazooCancelled
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.exceptions import LockTimeout as KazooLockTimeout
from kazoo.recipe.lock import Lock
from kazoo.retry import RetryFailedError

from service.errors import BackendError, LockTimeout

from ..tasks import retrieve
from .paths import ZnodePaths
from .session import ZooKeeperSession

log = logging.getLogger(__name__)

_CONTENDER = Lock._NODE_NAME  # in each contender's znode name (kazoo's, "__lock__")


def _acquire(recipe: Lock, timeout_s: float) -> bool:
    """In a worker thread: whether the lock was acquired within ``timeout_s`` (False if cancelled)."""
    try:
        return bool(recipe.acquire(blocking=True, timeout=timeout_s))
    except (KazooLockTimeout, KazooCancelled, RetryFailedError):
        return False


def _release(recipe: Lock) -> None:
    """In a worker thread: release, retried by kazoo until ZooKeeper answers or the client stops."""
    try:
        recipe.release()
    except KazooException as exc:  # the client stopped: its session, and the lock, are gone
        log.info("lock %s not released (%s): its session ends with the client", recipe.path, exc)


class NamedLocks:
    """The coordinator's ``lock(name)``: one holder at a time among every replica.

    Collaborators: ``ZooKeeperSession`` hands out kazoo's recipe bound to its client; the
    coordinator closes this before its session, which cancels the acquires still waiting.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, node_id: str) -> None:
        self._zk = zk
        self._paths = paths
        self._node_id = node_id
        self._local: dict[str, asyncio.Lock] = {}
        self._waiting: set[Lock] = set()  # acquires in progress, cancelled by ``close``
        self._cleanup: set[asyncio.Task[None]] = set()  # releases of abandoned acquires

    @asynccontextmanager
    async def hold(self, name: str, timeout_s: float) -> AsyncIterator[None]:
        # Waiters of this process queue here first: one contender (one blocked thread) per name.
        local = self._local.setdefault(name, asyncio.Lock())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                await local.acquire()
        except TimeoutError:
            raise self._timeout(name, timeout_s) from None
        try:
            async with self._held(name, max(deadline - loop.time(), 0.001), timeout_s):
                yield
        finally:
            local.release()

    @asynccontextmanager
    async def _held(self, name: str, left_s: float, timeout_s: float) -> AsyncIterator[None]:
        recipe = self._zk.lock_recipe(self._paths.lock(name), self._node_id)
        acquiring = asyncio.ensure_future(asyncio.to_thread(_acquire, recipe, left_s))
        self._waiting.add(recipe)
        try:
            acquired = await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            recipe.cancel()
            self._track(self._release_if_won(recipe, acquiring))
            raise
        except NoAuthError as exc:
            raise BackendError(f"ZooKeeper refused the lock {name!r}: a znode's ACL (NoAuthError).") from exc
        except KazooException as exc:
            raise self._zk.unavailable(f"was lost while acquiring the lock {name!r} ({exc!r})") from exc
        finally:
            self._waiting.discard(recipe)
        if not acquired:
            raise self._timeout(name, timeout_s)
        try:
            yield
        finally:
            await self._release(recipe)

    async def contended(self, name: str) -> bool:
        """Whether a contender's znode is under the lock ``name`` (a read: no thread, no write)."""
        try:
            children = await self._zk.call(
                lambda c: c.get_children_async(self._paths.lock(name)),
                what=f"list the contenders for the lock {name!r}",
                expect=(NoNodeError,),
            )
        except NoNodeError:  # never contended
            return False
        return any(_CONTENDER in child for child in children)

    @staticmethod
    def _timeout(name: str, timeout_s: float) -> LockTimeout:
        return LockTimeout(
            f"The lock {name!r} was not acquired within {timeout_s:g} s: another holder kept it."
        )

    async def _release(self, recipe: Lock) -> None:
        releasing = asyncio.ensure_future(asyncio.to_thread(_release, recipe))
        try:
            async with asyncio.timeout(self._zk.request_timeout_s):
                await asyncio.shield(releasing)
        except TimeoutError:
            log.warning("lock %s: ZooKeeper did not answer the release in time; it goes on", recipe.path)
            releasing.add_done_callback(retrieve)

    async def _release_if_won(self, recipe: Lock, acquiring: asyncio.Future[bool]) -> None:
        with contextlib.suppress(Exception):
            if await acquiring:
                await self._release(recipe)

    def _track(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._cleanup.add(task)
        task.add_done_callback(self._cleanup.discard)

    async def close(self) -> None:
        """Cancel the acquires still waiting and finish releasing the abandoned ones (bounded)."""
        for recipe in list(self._waiting):
            recipe.cancel()
        if self._cleanup:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._zk.request_timeout_s):
                    await asyncio.gather(*self._cleanup, return_exceptions=True)
