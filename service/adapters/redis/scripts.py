"""The Lua scripts that make each sessions change atomic, in one round trip each.

Every writing operation of the adapter is one script, so an instance's hash,
its lease in ``leases`` and its name in its group's set can never disagree,
whichever replica writes and however requests interleave. All scripts take
the same three keys and declare every key they touch::

    KEYS[1] = {prefix}instance:{group}/{name}    KEYS[2] = {prefix}leases    KEYS[3] = {prefix}group:{group}

Contracts (ARGV are strings; "margin" is ``redis_ttl_margin_ms``):

``CREATE`` (version, last_seen_ms, timeout_ms, margin, member, name, body, token)
    If the instance hash exists, change nothing and return 0, or 1 if
    ``token`` wrote it (a retry whose first attempt's reply was lost).
    Otherwise store the hash, set its TTL to timeout + margin, add the lease
    (score last_seen_ms + timeout_ms), the group entry and, given a fourth
    key (its owner's set), the member there, and return 1.

``SAVE`` (expected_version, last_seen_ms, timeout_ms, margin, member, name, body, token)
    If the hash is gone, return -1. If its version is not ``expected_version``,
    return -1, unless the stored version is ``expected_version + 1`` written
    by ``token``: then this is a retry of a save whose reply was lost, and its
    new version is returned as if it had just been written. Otherwise write
    body, version + 1, ``token`` and the later of the stored and the given
    last_seen_ms, renew TTL, lease and group entry, and return the new version.

``TOUCH`` (now_ms, margin, member, name)
    If the hash is gone, return 0. Otherwise move last_seen_ms forward to
    ``now_ms`` (never back), renew TTL, lease and group entry, and return 1.
    The version is not changed, so a concurrent save is not refused for it.

``DELETE`` (member, name)
    Remove the hash, the lease and the group entry; return 1 if the hash
    existed, else 0. The indexes are cleaned either way. (A retry after a
    lost reply answers 0; no caller depends on the answer of a delete that
    it made itself, so no token.)

``PRUNE`` (KEYS: group or owner set, instance keys...; ARGV: their entries in that set)
    Remove from the set every entry whose instance hash does not exist
    (deleted, or expired by TTL); return how many. Checked inside the script
    so that an instance re-created meanwhile keeps its entry.

A group set gets a TTL of at least the longest TTL of its instances, renewed
by every write, so it vanishes after its last instance. ``leases`` gets none:
see ``keys`` for why it must outlive the hashes.

``LuaScript`` runs a script by its SHA1 (EVALSHA, the source is sent once per
server) and loads it again when Redis answers NOSCRIPT (after a restart, a
failover or SCRIPT FLUSH).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from string import Template
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from . import keys

__all__ = ["ALL", "CREATE", "DELETE", "PRUNE", "SAVE", "TOUCH", "LuaScript"]

ScriptArg = str | bytes | int

# Shared by the scripts that write an instance. Field names come from ``keys`` so that the
# layout is spelled in one place; Template's $-syntax leaves Lua's own syntax alone.
_LEASE = """
local function renew_index(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function put_lease(seen, timeout, margin, member, name)
  local ttl = timeout + margin
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[2], tonumber(seen) + timeout, member)
  redis.call('SADD', KEYS[3], name)
  renew_index(KEYS[3], ttl)
end
"""

_CREATE = (
    _LEASE
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], '$WRITER') == ARGV[8] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], '$VERSION', ARGV[1], '$SEEN', ARGV[2], '$TIMEOUT', ARGV[3],
           '$WRITER', ARGV[8], '$STATE', ARGV[7])
put_lease(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6])
if KEYS[4] then redis.call('SADD', KEYS[4], ARGV[5]) end
return 1
"""
)

_SAVE = (
    _LEASE
    + """
local stored = redis.call('HMGET', KEYS[1], '$VERSION', '$SEEN', '$WRITER')
if not stored[1] then return -1 end
local expected = tonumber(ARGV[1])
local version = tonumber(stored[1])
if version ~= expected then
  if version == expected + 1 and stored[3] == ARGV[8] then return version end
  return -1
end
-- Strings are compared as numbers but stored as given, so no float formatting creeps in.
local seen = ARGV[2]
if tonumber(stored[2]) > tonumber(seen) then seen = stored[2] end
redis.call('HSET', KEYS[1], '$VERSION', expected + 1, '$SEEN', seen, '$TIMEOUT', ARGV[3],
           '$WRITER', ARGV[8], '$STATE', ARGV[7])
put_lease(seen, tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6])
return expected + 1
"""
)

_TOUCH = (
    _LEASE
    + """
local stored = redis.call('HMGET', KEYS[1], '$SEEN', '$TIMEOUT')
if not stored[1] then return 0 end
local seen = stored[1]
if tonumber(ARGV[1]) > tonumber(seen) then
  seen = ARGV[1]
  redis.call('HSET', KEYS[1], '$SEEN', seen)
end
put_lease(seen, tonumber(stored[2]), tonumber(ARGV[2]), ARGV[3], ARGV[4])
return 1
"""
)

_DELETE = """
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[2])
return existed
"""

_PRUNE = """
local removed = 0
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    removed = removed + redis.call('SREM', KEYS[1], ARGV[i - 1])
  end
end
return removed
"""


def _render(source: str) -> str:
    return Template(source).substitute(
        VERSION=keys.VERSION,
        SEEN=keys.SEEN,
        TIMEOUT=keys.TIMEOUT,
        WRITER=keys.WRITER,
        STATE=keys.STATE,
    )


class LuaScript:
    """One server-side script, run by SHA1 and (re)loaded when the server lacks it."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = _render(source)
        self.sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()

    async def load(self, redis: Redis) -> None:
        """Send the source to the server (the same SHA1 comes back: it is content-addressed)."""
        await redis.script_load(self.source)

    async def __call__(self, redis: Redis, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # The server forgot its scripts (restart, failover, SCRIPT FLUSH). NOSCRIPT means
            # nothing ran, so running it again after loading is safe even for SAVE.
            await self.load(redis)
            return await redis.evalsha(self.sha, len(keys), *keys, *args)

    def __repr__(self) -> str:
        return f"LuaScript({self.name!r}, sha={self.sha[:12]})"


# KEYS[1] idempotency entry; ARGV[1] the pending value: delete the entry only if still that claim.
_ABANDON = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS[1] the format marker; ARGV[1] this release's format: raise the marker to it if lower (or
# absent), and return what was there before (nil if nothing).
_CLAIM_FORMAT = """
local found = redis.call('GET', KEYS[1])
local number = tonumber(found)
if not found or (number and number < tonumber(ARGV[1])) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return found
"""

CREATE: Final = LuaScript("create", _CREATE)
SAVE: Final = LuaScript("save", _SAVE)
TOUCH: Final = LuaScript("touch", _TOUCH)
DELETE: Final = LuaScript("delete", _DELETE)
PRUNE: Final = LuaScript("prune", _PRUNE)
ABANDON: Final = LuaScript("abandon", _ABANDON)
CLAIM_FORMAT: Final = LuaScript("claim_format", _CLAIM_FORMAT)
ALL: Final = (CREATE, SAVE, TOUCH, DELETE, PRUNE, ABANDON, CLAIM_FORMAT)
