"""Idempotent requests: a retried request with the same Idempotency-Key gets the first answer.

The key's state lives in the Sessions port, so a retry through any replica finds it.
The first request claims the key, runs, and stores its response; a duplicate that
arrives meanwhile waits for that response; a key reused for a different request is
refused. A request that fails releases its claim, so that a retry runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import zlib
from collections.abc import Awaitable, Callable

from service.errors import BackendUnavailable, GatewayError, InvalidPayload

from .ports import Sessions
from .rules import check_idempotency_key

_WAIT_STEP_S = 0.02


class IdempotencyGuard:
    """Runs an action at most once per key within the window; collaborator: the Sessions port."""

    def __init__(self, sessions: Sessions, *, window_ms: int, wait_ms: int) -> None:
        self._sessions = sessions
        self._window_ms = window_ms
        self._wait_s = wait_ms / 1000

    async def run(
        self, key: str, fingerprint: str, action: Callable[[], Awaitable[bytes]], *, scope: str = ""
    ) -> tuple[bytes, bool]:
        """The response for ``key`` within ``scope`` and whether it is a replay of an earlier request's.

        The store sees a digest of (scope, key), never the key itself: keys of different scopes (a
        client and a path, say) never meet, and every stored key has the same small size. Responses
        are kept compressed: a produce's offsets compress well, and they are all a retry needs.
        """
        check_idempotency_key(key)
        key = hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()
        deadline = time.monotonic() + self._wait_s
        while True:
            held = await self._sessions.claim(key, fingerprint, self._window_ms)
            if held is None:
                try:
                    response = await action()
                except BaseException:
                    with contextlib.suppress(GatewayError):  # the claim then lapses with its window
                        await self._sessions.abandon(key, fingerprint)
                    raise
                await self._sessions.fulfil(key, fingerprint, zlib.compress(response, 1), self._window_ms)
                return response, False
            if held.fingerprint != fingerprint:
                raise InvalidPayload(
                    "This Idempotency-Key was already used for a different request; use a new key."
                )
            if held.response is not None:
                return zlib.decompress(held.response), True
            if time.monotonic() >= deadline:
                raise BackendUnavailable(
                    "A request with this Idempotency-Key is still in progress; retry shortly.", retry_after=1
                )
            await asyncio.sleep(_WAIT_STEP_S)
