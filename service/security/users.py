"""The credentials file of HTTP Basic: one ``name:hash`` line per user, argon2id hashes.

``brokergate users add|remove|list`` writes and reads it (atomically, mode 0600); the gateway
reads it again when it changes, without a restart.

Checking a password against argon2 costs tens of milliseconds and 64 MiB by design, so a
verdict is kept: a correct (name, password) is remembered under a keyed digest (never the
password) until that user's line changes, and the next request with it costs a dictionary
lookup. A wrong password is never remembered. A name that is not in the file is checked all
the same, against a stand-in hash of the file's own parameters, so that neither the answer nor
its time tells whether a user exists.

``Verifier`` (the async side) runs the hashes in worker threads, a few at a time, handed out
fairly between client addresses, and refuses a client or a name that failed too often
(``service.security.guesses``): a client guessing passwords costs the others nothing. A pair
already verified is let in before any budget is asked, so guessing a user's password, from
anywhere, never refuses the one that user signs in with.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Final

from argon2 import Parameters, PasswordHasher, Type, extract_parameters
from argon2.exceptions import InvalidHashError, VerificationError
from argon2.low_level import ARGON2_VERSION

from service.adapters.embedded.fileio import atomic_write
from service.adapters.format_versions import USERS_FORMAT, check_version
from service.errors import NewerFormat

from .guesses import GuessBudget, HashLanes, TooManyGuesses

MAX_NAME_CHARS: Final = 255
MAX_ADDRESSES_PER_USER: Final = 16  # where a user signed in from lately, kept to spare it the name's budget
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


# The file's first line: its format (``format_versions.USERS_FORMAT``).
_HEADER: Final = "# brokergate users file, format "


def read_users(path: Path) -> dict[str, str]:
    """Name → hash; a missing file is no users. ``UsersFileError`` for a file this release cannot
    read, one written by a newer release (a higher format in its first line) included."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if number == 1 and line.startswith(_HEADER):
            found = line.removeprefix(_HEADER).strip()
            try:
                check_version(f"users file {path}", int(found) if found.isdigit() else found, USERS_FORMAT)
            except NewerFormat as exc:
                raise UsersFileError(str(exc)) from None
            continue
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, hashed = line.partition(":")
        if not sep or not _is_hash(hashed):
            raise UsersFileError(f"{path}:{number}: expected 'name:$argon2id$...'")
        users[check_user_name(name)] = hashed
    return users


def _is_hash(hashed: str) -> bool:
    # A hash argon2 cannot read would answer at once: its user's wrong passwords would be told
    # apart from the others' by time. Argon2 wants a salt of 8 bytes or more, an output of 4.
    if not hashed.startswith("$argon2"):
        return False
    try:
        extract_parameters(hashed)
        salt, tag = (
            base64.b64decode(part + "=" * (-len(part) % 4), validate=True) for part in hashed.split("$")[-2:]
        )
    except (InvalidHashError, ValueError):
        return False
    return len(salt) >= 8 and len(tag) >= 4


def _parameters_part(hashed: str) -> str:
    # "$argon2id$v=19$m=65536,t=3,p=4$salt$hash": type, version and costs, without salt and hash
    return hashed.rsplit("$", 2)[0]


def _stand_in(params: Parameters) -> str:
    """A hash of these parameters no password matches: checking one costs what a user's costs."""

    def b64(n: int) -> str:
        return base64.b64encode(secrets.token_bytes(n)).decode().rstrip("=")

    kind = {Type.ID: "argon2id", Type.I: "argon2i", Type.D: "argon2d"}[params.type]
    return (
        f"${kind}$v={params.version}$m={params.memory_cost},t={params.time_cost},p={params.parallelism}"
        f"${b64(params.salt_len)}${b64(params.hash_len)}"
    )


def _stand_in_for(users: dict[str, str]) -> str:
    """The stand-in hash of a file: the parameters most of its users' hashes have (the hasher's
    when it is empty), so an unknown name costs what a typical user does."""
    counts = Counter(_parameters_part(hashed) for hashed in users.values())
    if counts:
        typical = counts.most_common(1)[0][0]
        return _stand_in(
            extract_parameters(next(h for h in users.values() if _parameters_part(h) == typical))
        )
    h = _HASHER
    return _stand_in(
        Parameters(h.type, ARGON2_VERSION, h.salt_len, h.hash_len, h.time_cost, h.memory_cost, h.parallelism)
    )


def write_users(path: Path, users: dict[str, str]) -> None:
    lines = (
        _HEADER
        + f"{USERS_FORMAT}\n"
        + "".join(f"{name}:{hashed}\n" for name, hashed in sorted(users.items()))
    )
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
    """The users of one credentials file, read again when it changes, with remembered verdicts:
    the correct passwords (as keyed digests) and the addresses each user signed in from lately,
    both forgotten for a user whose line changes, and only for that user."""

    def __init__(self, path: Path, *, remembered: int = 10_000) -> None:
        self.path = path
        self._remembered = remembered
        self._key = secrets.token_bytes(32)  # digests of passwords mean nothing outside this process
        self._lock = threading.Lock()
        self._users: dict[str, str] = {}
        self._stand_in = _stand_in_for({})
        self._stamp: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._good: OrderedDict[bytes, str] = OrderedDict()  # digest → name
        self._places: dict[str, OrderedDict[str, None]] = {}  # name → addresses it signed in from
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
        stand_in = _stand_in_for(users)
        with self._lock:
            old = self._users
            changed = {name for name in old.keys() | users.keys() if old.get(name) != users.get(name)}
            self._users, self._stamp, self._stand_in = users, stamp, stand_in
            # Only the users whose line changed are checked again: a change to one user must not
            # send every other one back to the hashing queue.
            for digest in [digest for digest, name in self._good.items() if name in changed]:
                del self._good[digest]
            for name in changed:
                self._places.pop(name, None)

    def _fresh(self) -> None:
        if time.monotonic() - self._checked >= _RELOAD_EVERY_S:
            try:
                self.reload()
            except UsersFileError:
                pass  # a file being edited badly: keep serving the last good one

    def remembered(self, name: str, password: str, address: str | None = None) -> bool:
        """True if this pair was verified since the user's line last changed (``address`` is then
        the latest place the user signed in from); False: it must be hashed (whether or not the
        user exists: the answer must not tell).

        The password is compared with nothing: its keyed digest is looked up, a key no client can
        aim at a neighbour of, so the lookup's time says nothing of how near a guess came."""
        self._fresh()
        digest = self.digest(name, password)
        with self._lock:
            known = self._good.get(digest)
            if known is None or not hmac.compare_digest(_utf8(known), _utf8(name)):
                return False
            self._good.move_to_end(digest)
            if address is not None:
                self._signed_in(name, address)
            return True

    def hash_of(self, name: str) -> str | None:
        """The hash ``name`` has in the file now (None: no such user): a credential checked
        against it holds while it stays the same."""
        self._fresh()
        with self._lock:
            return self._users.get(name)

    def signed_in_from(self, name: str, address: str) -> bool:
        """True if ``name`` signed in from ``address`` since its line last changed."""
        with self._lock:
            places = self._places.get(name)
            return places is not None and address in places

    def verify(self, name: str, password: str, address: str | None = None) -> bool:
        """Check the password (argon2: slow on purpose; call from a worker thread). An unknown
        name is checked against the stand-in hash: the same work, the same answer."""
        with self._lock:
            hashed = self._users.get(name)
            checked = self._stand_in if hashed is None else hashed
        try:
            _HASHER.verify(checked, password)
        except (VerificationError, InvalidHashError):
            return False
        if hashed is None:  # no password matches a stand-in; should one, it still is no user
            return False
        with self._lock:
            if self._users.get(name) == hashed:  # not changed meanwhile
                self._good[self.digest(name, password)] = name
                while len(self._good) > self._remembered:
                    self._good.popitem(last=False)
                if address is not None:
                    self._signed_in(name, address)
        return True

    def _signed_in(self, name: str, address: str) -> None:
        """``name`` signed in from ``address`` (held under the lock): the latest of its places."""
        places = self._places.setdefault(name, OrderedDict())
        places[address] = None
        places.move_to_end(address)
        while len(places) > MAX_ADDRESSES_PER_USER:
            places.popitem(last=False)

    def digest(self, name: str, password: str) -> bytes:
        """The keyed digest a (name, password) is remembered under."""
        data = _utf8(name) + b"\0" + _utf8(password)
        return hashlib.blake2b(data, key=self._key, digest_size=32).digest()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class Verifier:
    """``UsersFile`` from the event loop: remembered verdicts at once, hashing in threads, fairly.

    First a remembered verdict: a pair verified before is let in at once, whatever is being
    guessed at its address or for its name, so no guesser can lock a user out of a password it
    already uses. Any other pair asks the ``GuessBudget`` whether its address or its name (or,
    from a place the name signed in from, that pair) failed too often: then it is refused with
    ``TooManyGuesses`` and costs nothing. Otherwise it is hashed in a worker thread, at most
    ``concurrency`` at a time, the turns handed out by ``HashLanes`` (one lane per address,
    addresses without recent failures first). The same pair checked by several requests at once
    is hashed once. A failed check, known name or not, is charged to the address and the name.
    """

    def __init__(
        self,
        users: UsersFile,
        *,
        concurrency: int = 2,
        guesses_per_address: int = 20,
        guesses_per_name: int = 10,
        guess_refill_s: float = 6.0,
    ) -> None:
        self.users = users
        self.budget = GuessBudget(
            per_address=guesses_per_address, per_name=guesses_per_name, refill_s=guess_refill_s
        )
        self._lanes = HashLanes(concurrency, self.budget.clean)
        self._hashing: dict[bytes, asyncio.Task[bool]] = {}

    async def check(self, name: str, password: str, address: str | None = None) -> bool:
        """Whether ``password`` is ``name``'s; raises ``TooManyGuesses`` (429) over a budget."""
        where = address or "unknown"
        # The budgets gate the hashing: a pair already known good costs none, and answering to
        # them would let a guesser's failures refuse the very user it guesses.
        if self.users.remembered(name, password, where):
            return True
        self._refuse_over_budget(name, where)
        digest = self.users.digest(name, password)
        hashing = self._hashing.get(digest)
        if hashing is None:
            hashing = asyncio.create_task(self._hash(name, password, where))
            self._hashing[digest] = hashing
            hashing.add_done_callback(lambda done: self._settled(digest, done))
        # Shielded: a client that goes away leaves the hash running in its turn, so the turns
        # bound the threads, and the others waiting for the same pair still get the verdict.
        return await asyncio.shield(hashing)

    def _refuse_over_budget(self, name: str, address: str) -> bool:
        """Raise ``TooManyGuesses`` if the check is over a budget; else whether it is from a place
        the name signed in from (which budget it answers to)."""
        signed_in_here = self.users.signed_in_from(name, address)
        wait = self.budget.refusal(name, address, signed_in_here=signed_in_here)
        if wait is not None:
            raise TooManyGuesses(retry_after=wait)
        return signed_in_here

    async def _hash(self, name: str, password: str, address: str) -> bool:
        async with self._lanes.turn(address):
            signed_in_here = self._refuse_over_budget(name, address)  # counted while it waited?
            good = await asyncio.to_thread(self.users.verify, name, password, address)
        if not good:
            self.budget.failed(name, address, signed_in_here=signed_in_here)
        return good

    def _settled(self, digest: bytes, done: asyncio.Task[bool]) -> None:
        self._hashing.pop(digest, None)
        if not done.cancelled():
            done.exception()  # retrieved: a refusal nobody waits for any more is no error to log
