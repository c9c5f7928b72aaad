"""The Redis ``QuotaStore``: token buckets shared by every gateway replica.

A script call refills and charges a request's buckets atomically (``take``
before, ``debit`` after a read), on the Redis server's clock, so replicas
with skewed clocks still share one rate. The script mirrors
``service.core.buckets`` (refill, ``admits``, ``ms_until_full``) and returns
the levels it saw, from which the core derives Retry-After.

Calls that arrive while one is on its way to Redis wait for it and then go
together, in one script call that charges them one after the other, in the
order they arrived: each stays all-or-nothing over its own buckets and sees
what the ones before it took, exactly as separate calls would. Under load a
replica thus pays one round trip (and redis-py's per-call cost, most of what
a quota check costs the gateway) for many requests, not one each.

Idle buckets clean themselves up: each key's TTL is the time until it is
full again (plus a margin), and a missing bucket is a full one, so an expiry
never changes an answer. Keys are named by ``KeyLayout.quota``; an API key
only ever appears hashed in them (``quotas.client_id``).

Failures are ``RedisConnection``'s: ``BackendUnavailable``, here within
``MAX_WAIT_MS`` at most per timeout, which ``Quotas`` turns into failing open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from string import Template
from typing import Final

from service.core.buckets import Charge
from service.errors import BackendUnavailable

from ..lifecycle import Lifecycle
from . import keys
from .connection import RedisConnection, RedisURL
from .keys import KeyLayout
from .scripts import LuaScript, ScriptArg
from .security import RedisSecurity

__all__ = ["RedisQuotas"]

# How long a bucket outlives the moment it is full again: covers clock rounding, nothing more.
TTL_MARGIN_MS: Final = 1_000
# The longest a quota check waits for Redis (connecting, or for its answer) before the request goes
# through unchecked: a check slower than this costs more than the quota is worth.
MAX_WAIT_MS: Final = 500
# The most calls one script call carries; the rest go in the next one.
MAX_BATCH: Final = 256

# ARGV[1]: TTL margin (ms). ARGV[2]: the calls, in order, as one space-separated list of numbers
# (one string costs redis-py far less to send than as many arguments): per call, 1 to take (all
# its buckets or none) or 0 to debit, its bucket count n, then rate (units/s), capacity and cost
# of each of its buckets. KEYS: the calls' buckets, in the same order. Returns one string per
# call: the levels before its charge, space-separated, as exact decimals (Redis would truncate
# numbers).
_CHARGE = Template("""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local margin = tonumber(ARGV[1])
local arg = {}
for word in string.gmatch(ARGV[2], '%S+') do arg[#arg + 1] = tonumber(word) end
local replies = {}
local a, k = 1, 0
while a <= #arg do
  local take, n = arg[a] == 1, arg[a + 1]
  a = a + 2
  local levels, admit = {}, true
  for i = 1, n do
    local j = a + 3 * (i - 1)
    local rate, cap = arg[j], arg[j + 1]
    local held = redis.call('HMGET', KEYS[k + i], '$LEVEL', '$UPDATED')
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
  if admit or not take then
    for i = 1, n do
      local j = a + 3 * (i - 1)
      local rate, cap, cost = arg[j], arg[j + 1], arg[j + 2]
      if cost ~= 0 then
        local left = levels[i] - cost
        local ttl = math.min(math.ceil((cap - left) * 1000 / rate) + margin, 1e15)
        redis.call('HSET', KEYS[k + i], '$LEVEL', string.format('%.17g', left),
                   '$UPDATED', string.format('%.17g', now))
        redis.call('PEXPIRE', KEYS[k + i], string.format('%d', ttl))
      end
    end
  end
  replies[#replies + 1] = table.concat(out, ' ')
  a = a + 3 * n
  k = k + n
end
return replies
""").substitute(LEVEL=keys.QUOTA_LEVEL, UPDATED=keys.QUOTA_UPDATED)

CHARGE: Final = LuaScript("quota_charge", _CHARGE)


class _Call:
    """One ``take`` or ``debit`` waiting for its place in a script call."""

    __slots__ = ("charges", "done", "take")

    def __init__(self, take: bool, charges: Sequence[Charge]) -> None:
        self.take = take
        self.charges = charges
        self.done: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()


class RedisQuotas(Lifecycle):
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
        security: RedisSecurity | None = None,
    ) -> None:
        super().__init__()  # the start/stop state
        self._conn = RedisConnection(
            RedisURL.parse(url),
            connect_timeout_ms=min(connect_timeout_ms, MAX_WAIT_MS),
            socket_timeout_ms=min(socket_timeout_ms, MAX_WAIT_MS),
            security=security,
        )
        self._keys = KeyLayout(key_prefix)
        self._waiting: list[_Call] = []  # for the next script call
        self._sending: list[_Call] = []  # in the script call on its way
        self._sender: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The server, without credentials."""
        return str(self._conn.url)

    async def _open(self) -> None:
        await self._conn.start()

    async def _close(self) -> None:
        """Fail the calls still waiting, then close the connections."""
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        stopping = BackendUnavailable("The Redis quota store is stopping.")
        for call in self._sending + self._waiting:
            _settle(call, stopping)
        self._sending, self._waiting = [], []
        await self._conn.stop()

    async def take(self, charges: Sequence[Charge]) -> list[float]:
        return await self._charge(True, charges) if charges else []

    async def debit(self, charges: Sequence[Charge]) -> None:
        if charges:
            await self._charge(False, charges)

    async def _charge(self, take: bool, charges: Sequence[Charge]) -> list[float]:
        call = _Call(take, charges)
        self._waiting.append(call)
        if self._sender is None:
            self._sender = asyncio.create_task(self._send())
        return await call.done

    async def _send(self) -> None:
        """Send what waits, a script call at a time, until nothing does."""
        try:
            while self._waiting:
                self._sending, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                outcomes: Sequence[list[float] | BaseException]
                try:
                    outcomes = await self._run(self._sending)
                except Exception as exc:  # BackendUnavailable above all; each caller gets it
                    outcomes = [exc] * len(self._sending)
                for call, outcome in zip(self._sending, outcomes, strict=True):
                    _settle(call, outcome)
                self._sending = []
        finally:
            self._sender = None

    async def _run(self, calls: Sequence[_Call]) -> list[list[float]]:
        """One script call charging ``calls`` in order; per call, the levels before its charge."""
        bucket_keys: list[str] = []
        numbers: list[str] = []
        for call in calls:
            numbers += ["1" if call.take else "0", str(len(call.charges))]
            for c in call.charges:
                bucket_keys.append(self._keys.quota(c.bucket))
                numbers += [repr(c.limit.rate), repr(c.limit.capacity), repr(float(c.cost))]
        args: list[ScriptArg] = [TTL_MARGIN_MS, " ".join(numbers)]
        replies: list[bytes] = await self._conn.run(lambda r: CHARGE(r, bucket_keys, args))
        return [[float(level) for level in reply.split()] for reply in replies]


def _settle(call: _Call, outcome: list[float] | BaseException) -> None:
    if call.done.done():  # its request was cancelled; what it took stays taken, as with a lone call
        return
    if isinstance(outcome, BaseException):
        call.done.set_exception(outcome)
    else:
        call.done.set_result(outcome)
