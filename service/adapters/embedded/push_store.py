"""Push subscriptions of the embedded coordinator: one JSON file, replaced whole on every change.

``<data_dir>/coordinator/push.json`` holds every subscription with its version
(``{"format": 1, "subscriptions": {name: {"version": n, "data": …}}}``, each ``data`` the
port's wire form, ``core.push.stored``). A change is written to a new file, made durable, and
renamed over the old one before it is visible: a crash keeps the old set or the new, whole.
Subscriptions change rarely (people make them), so a whole-file write each time is cheap.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final, cast

import orjson

from service.core.push.stored import StoredPush
from service.errors import BackendError

from ..format_versions import check_version
from .fileio import atomic_write, unavailable

PUSH_FILE: Final = "push.json"
PUSH_FORMAT: Final = 1


class EmbeddedPushStore:
    """The ``PushStore`` port in one file beside the coordinator's other state."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / PUSH_FILE
        self._subs: dict[str, tuple[StoredPush, int]] = {}
        self._writing = asyncio.Lock()

    async def open(self) -> None:
        """Read the file (none yet: no subscriptions); ``BackendError`` if it is damaged."""
        try:
            self._subs = await asyncio.to_thread(_read, self._path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"cannot read the push subscriptions in {self._path}: {exc}") from exc

    async def push_subscriptions(self) -> dict[str, tuple[StoredPush, int]]:
        return dict(self._subs)

    async def push_subscription(self, name: str) -> tuple[StoredPush, int] | None:
        return self._subs.get(name)

    async def put_push_subscription(
        self, name: str, data: StoredPush, *, expected_version: int | None
    ) -> int | None:
        async with self._writing:
            found = self._subs.get(name)
            if (found is None) != (expected_version is None) or (
                found is not None and found[1] != expected_version
            ):
                return None
            version = 0 if found is None else found[1] + 1
            await self._write({**self._subs, name: (data, version)})
            return version

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        async with self._writing:
            found = self._subs.get(name)
            if found is None or found[1] != expected_version:
                return False
            await self._write({n: v for n, v in self._subs.items() if n != name})
            return True

    async def _write(self, subs: dict[str, tuple[StoredPush, int]]) -> None:
        doc = {
            "format": PUSH_FORMAT,
            "subscriptions": {n: {"version": v, "data": d} for n, (d, v) in subs.items()},
        }
        try:
            await asyncio.to_thread(atomic_write, self._path, orjson.dumps(doc))
        except OSError as exc:
            raise unavailable("Cannot write the push subscriptions", exc) from exc
        self._subs = subs


def _read(path: Path) -> dict[str, tuple[StoredPush, int]]:
    try:
        doc: Any = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("subscriptions"), dict):
        raise ValueError('expected {"format": 1, "subscriptions": {...}}')
    check_version(f"the push subscriptions file {path}", doc.get("format"), PUSH_FORMAT)
    return {
        name: (cast(StoredPush, entry["data"]), int(entry["version"]))
        for name, entry in doc["subscriptions"].items()
    }
