"""The Redis ``QuotaStore``: token buckets shared by every gateway replica.

One script call per request (``take`` before, ``debit`` after a read) refills
and charges all the request's buckets atomically, on the Redis server's
clock, so replicas with skewed clocks still share one rate. The script
mirrors ``service.core.quotas`` (refill, ``admits``, ``ms_until_full``) and
returns the levels it saw, from which the core derives Retry-After.

Idle buckets clean themselves up: each key's TTL is the time until it is
full again (plus a margin), and a missing bucket is a full one, so an expiry
never changes an answer. Keys are named by ``KeyLayout.quota``; an API key
only ever appears hashed in them (``quotas.client_id``).

Failures are ``RedisConnection``'s: ``BackendUnavailable``, here within
``MAX_WAIT_MS`` at most per timeout, which ``Quotas`` turns into failing open.
"""

from __future__ import annotations

from collections.abc import Sequence
from string import Template
from typing import Final

from service.core.quotas import Charge

from ..lifecycle import AsyncLifecycle
from . import keys
from .connection import RedisConnection, RedisURL
from .keys import KeyLayout
from .scripts import LuaScript, ScriptArg

__all__ = ["RedisQuotas"]

# How long a bucket outlives the moment it is full again: covers clock rounding, nothing more.
TTL_MARGIN_MS: Final = 1_000
# The longest a quota check waits for Redis (connecting, or for its answer) before the request goes
# through unchecked: a check slower than this costs more than the quota is worth.
MAX_WAIT_MS: Final = 500

# KEYS[i]: bucket i. ARGV[1]: '1' takes (all buckets or none), '0' debits; ARGV[2]: TTL margin (ms);
# then for bucket i: ARGV[3i] rate (units/s), ARGV[3i+1] capacity, ARGV[3i+2] cost.
# Returns the levels before the charge, as exact decimal strings (Redis would truncate numbers).
_CHARGE = Template("""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local levels, admit = {}, true
for i, key in ipairs(KEYS) do
  local rate, cap = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local held = redis.call('HMGET', key, '$LEVEL', '$UPDATED')
  local level = cap
  if held[1] and held[2] then
    local elapsed = math.max(0, now - tonumber(held[2]))
    level = math.min(cap, tonumber(held[1]) + elapsed * rate / 1000)
  end
  levels[i] = level
  if level <= 0 then admit = false end
end
local out = {}
for i, level in ipairs(levels) do out[i] = string.format('%.17g', level) end
if ARGV[1] == '1' and not admit then return out end
for i, key in ipairs(KEYS) do
  local rate, cap, cost = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  if cost ~= 0 then
    local left = levels[i] - cost
    local ttl = math.min(math.ceil((cap - left) * 1000 / rate) + tonumber(ARGV[2]), 1e15)
    redis.call('HSET', key, '$LEVEL', string.format('%.17g', left), '$UPDATED', string.format('%.17g', now))
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  end
end
return out
""").substitute(LEVEL=keys.QUOTA_LEVEL, UPDATED=keys.QUOTA_UPDATED)

CHARGE: Final = LuaScript("quota_charge", _CHARGE)


class RedisQuotas(AsyncLifecycle):
    """Named token buckets in Redis under one deployment's ``key_prefix``, for any number of replicas.

    Collaborators: ``RedisConnection`` (its own client and pool, so quota
    checks never queue behind consumer-session traffic), ``KeyLayout``.
    """

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = keys.DEFAULT_PREFIX,
        connect_timeout_ms: int = 2_000,
        socket_timeout_ms: int = 2_000,
    ) -> None:
        self._conn = RedisConnection(
            RedisURL.parse(url),
            connect_timeout_ms=min(connect_timeout_ms, MAX_WAIT_MS),
            socket_timeout_ms=min(socket_timeout_ms, MAX_WAIT_MS),
        )
        self._keys = KeyLayout(key_prefix)

    @property
    def url(self) -> str:
        """The server, without credentials."""
        return str(self._conn.url)

    async def start(self) -> None:
        await self._conn.start()

    async def stop(self) -> None:
        await self._conn.stop()

    async def _charge(self, take: bool, charges: Sequence[Charge]) -> list[float]:
        bucket_keys = [self._keys.quota(c.bucket) for c in charges]
        args: list[ScriptArg] = ["1" if take else "0", TTL_MARGIN_MS]
        for c in charges:
            args += [repr(c.limit.rate), repr(c.limit.capacity), repr(float(c.cost))]
        levels = await self._conn.run(lambda r: CHARGE(r, bucket_keys, args))
        return [float(level) for level in levels]

    async def take(self, charges: Sequence[Charge]) -> list[float]:
        return await self._charge(True, charges) if charges else []

    async def debit(self, charges: Sequence[Charge]) -> None:
        if charges:
            await self._charge(False, charges)
