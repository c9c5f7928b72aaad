"""What every adapter shares: ``async with adapter:`` means start, then stop."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncLifecycle:
    """Mixin for adapters with ``start()``/``stop()``: makes them async context managers."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
