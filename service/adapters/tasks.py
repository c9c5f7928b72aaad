"""Small asyncio helpers the adapters share: operations that must finish, quiet futures."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["retrieve", "uncancellable"]

T = TypeVar("T")


def retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a done future's exception as retrieved: no "exception was never retrieved" warning.

    For futures whose callers may all have gone away (use it as a done callback).
    """
    if not future.cancelled():
        future.exception()


async def uncancellable(coro: Coroutine[Any, Any, T]) -> T:
    """Run an operation (an admin change, say) to its end even if the caller goes away half way.

    The caller still sees its own cancellation; the operation goes on in its task.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(retrieve)
        raise
