"""The credentials file of HTTP Basic: one ``name:hash`` line per user, argon2id hashes.

``brokergate users add|remove|list`` writes and reads it (atomically, mode 0600); the gateway
reads it again when it changes, without a restart.

Checking a password against argon2 costs tens of milliseconds and 64 MiB by design, so a
verdict is kept: a correct (name, password) is remembered under a keyed digest (never the
password) until the file changes, and the next request with it costs a dictionary lookup.
A wrong password is never remembered; ``Verifier`` (the async side) runs the hash in a
worker thread, at most ``concurrency`` at a time, so a client guessing passwords costs the
others nothing but those threads.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Final

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from service.adapters.embedded.fileio import atomic_write

MAX_NAME_CHARS: Final = 255
_RELOAD_EVERY_S: Final = 1.0
_HASHER: Final = PasswordHasher()


class UsersFileError(ValueError):
    """The file or a name in it cannot be used (the message says which line)."""


# Names a user may not have: Kafka's wildcard principal (``User:*``, every user in an ACL) and the
# name the ACLs and the audit trail give every unauthenticated client (``User:ANONYMOUS``).
RESERVED_NAMES: Final = frozenset({"*", "ANONYMOUS"})


def check_user_name(name: str) -> str:
    if not 0 < len(name) <= MAX_NAME_CHARS or ":" in name or not name.isprintable() or name != name.strip():
        raise UsersFileError(
            f"A user name is 1 to {MAX_NAME_CHARS} printable characters, without ':' or surrounding spaces."
        )
    if name in RESERVED_NAMES:
        raise UsersFileError(
            f"{name!r} cannot be a user's name: 'User:*' is every user in an ACL, and 'User:ANONYMOUS' "
            "every client that did not authenticate."
        )
    return name


def read_users(path: Path) -> dict[str, str]:
    """Name → hash; a missing file is no users."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, hashed = line.partition(":")
        if not sep or not hashed.startswith("$argon2"):
            raise UsersFileError(f"{path}:{number}: expected 'name:$argon2id$...'")
        users[check_user_name(name)] = hashed
    return users


def write_users(path: Path, users: dict[str, str]) -> None:
    lines = "".join(f"{name}:{hashed}\n" for name, hashed in sorted(users.items()))
    path.parent.mkdir(parents=True, exist_ok=True)  # users may be added before the first start
    atomic_write(path, lines.encode(), mode=0o600)


def add_user(path: Path, name: str, password: str) -> bool:
    """Add ``name`` or set its password; True if it was new."""
    if not password:
        raise UsersFileError("The password is empty.")
    users = read_users(path)
    new = check_user_name(name) not in users
    users[name] = _HASHER.hash(password)
    write_users(path, users)
    return new


def remove_user(path: Path, name: str) -> bool:
    """Remove ``name``; False if there was no such user."""
    users = read_users(path)
    if users.pop(name, None) is None:
        return False
    write_users(path, users)
    return True


class UsersFile:
    """The users of one credentials file, read again when it changes, with remembered verdicts."""

    def __init__(self, path: Path, *, remembered: int = 10_000) -> None:
        self.path = path
        self._remembered = remembered
        self._key = secrets.token_bytes(32)  # digests of passwords mean nothing outside this process
        self._lock = threading.Lock()
        self._users: dict[str, str] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._good: OrderedDict[bytes, str] = OrderedDict()  # digest → name
        self.reload()

    def reload(self) -> None:
        """Read the file if it changed (raises ``UsersFileError`` if it is malformed)."""
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            self._checked = time.monotonic()
            if stamp == self._stamp and self._stamp is not None:
                return
        users = read_users(self.path)
        with self._lock:
            self._users, self._stamp = users, stamp
            self._good.clear()

    def _fresh(self) -> None:
        if time.monotonic() - self._checked >= _RELOAD_EVERY_S:
            try:
                self.reload()
            except UsersFileError:
                pass  # a file being edited badly: keep serving the last good one

    def hash_of(self, name: str) -> str | None:
        """The hash ``name`` has in the file now (None: no such user): a credential checked
        against it holds while it stays the same."""
        self._fresh()
        with self._lock:
            return self._users.get(name)

    def remembered(self, name: str, password: str) -> bool | None:
        """True if this pair was verified since the file last changed; None if it must be hashed."""
        self._fresh()
        with self._lock:
            digest = self._digest(name, password)
            if self._good.get(digest) == name:
                self._good.move_to_end(digest)
                return True
            return None if name in self._users else False

    def verify(self, name: str, password: str) -> bool:
        """Check the password (argon2: slow on purpose; call from a worker thread)."""
        with self._lock:
            hashed = self._users.get(name)
        if hashed is None:
            return False
        try:
            _HASHER.verify(hashed, password)
        except (VerificationError, InvalidHashError):
            return False
        with self._lock:
            if self._users.get(name) == hashed:  # not changed meanwhile
                self._good[self._digest(name, password)] = name
                while len(self._good) > self._remembered:
                    self._good.popitem(last=False)
        return True

    def _digest(self, name: str, password: str) -> bytes:
        data = name.encode() + b"\0" + password.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, key=self._key, digest_size=32).digest()


class Verifier:
    """``UsersFile`` from the event loop: remembered verdicts at once, hashing in threads, bounded."""

    def __init__(self, users: UsersFile, *, concurrency: int = 2) -> None:
        self.users = users
        self._slots = asyncio.Semaphore(concurrency)

    async def check(self, name: str, password: str) -> bool:
        known = self.users.remembered(name, password)
        if known is not None:
            return known
        async with self._slots:
            return await asyncio.to_thread(self.users.verify, name, password)
