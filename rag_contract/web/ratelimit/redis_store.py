"""``RedisStore``: buckets in redis, shared by every instance (the ``BucketStore`` protocol of
``stores``), running ``bucket.refill_and_take`` as one Lua script.

A module of its own so the redis client (and what it imports, ~0.1 s at start) loads only
in a Redis-backed deployment: ``serving`` imports it only when given a redis URL.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.backoff
import redis.exceptions
import redis.retry

from rag_contract.web.ratelimit.bucket import Allowance, Decision, bucket_ttl_ms
from rag_contract.web.ratelimit.stores import StoreUnavailable

REDIS_KEY_PREFIX = "ragc:rl:"

# KEYS[i]: bucket hash {tokens, ts} of the i-th decision; ARGV[4i-3..4i]: its now, per_minute,
# burst, ttl_ms. Decides each in order (a key named twice sees its first decision's write) and
# returns {allowed_1, retry_1, allowed_2, retry_2, ...}. The body of the loop mirrors
# refill_and_take exactly. Numbers are stored with %.17g so a float survives the round trip
# through a redis string bit for bit (Lua's default tostring keeps only 14 digits and the two
# stores would drift apart).
_TAKE_LUA = """
local out = {}
for i = 1, #KEYS do
  local a = (i - 1) * 4
  local now = tonumber(ARGV[a + 1])
  local rate = tonumber(ARGV[a + 2]) / 60.0
  local capacity = tonumber(ARGV[a + 3])
  local ttl_ms = tonumber(ARGV[a + 4])
  local saved = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens, last
  if saved[1] and saved[2] then
    tokens = tonumber(saved[1])
    last = tonumber(saved[2])
  else
    tokens = capacity
    last = now
  end
  local elapsed = now - last
  if elapsed < 0.0 then elapsed = 0.0 end
  tokens = math.min(capacity, tokens + elapsed * rate)
  if now > last then last = now end
  local allowed = 0
  local retry = 0
  if tokens >= 1.0 then
    tokens = tokens - 1.0
    allowed = 1
  else
    retry = math.ceil((1.0 - tokens) / rate)
  end
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', last))
  redis.call('PEXPIRE', KEYS[i], ttl_ms)
  out[#out + 1] = allowed
  out[#out + 1] = retry
end
return out
"""

# One decision waiting for its event loop's next round trip: key, now, allowance, and the future
# its request awaits.
_Waiting = tuple[str, float, Allowance, "asyncio.Future[Decision]"]


class RedisStore:
    """Buckets in redis, shared by every instance of the service.

    One script call decides atomically (refill and take), so concurrent requests from any
    number of instances never over-admit. ``now`` comes from the caller (use wall-clock
    ``time.time`` in production so instances agree; a frozen clock in tests). Keys are
    ``prefix + identity`` and expire ``bucket_ttl_ms`` after their last use. Any redis
    failure raises ``StoreUnavailable``.

    On the event loop (``take_async``) decisions are coalesced: every request that asks for one
    in the same turn of the loop waits for the next, and all of them go to redis in one EVALSHA
    over their keys, decided in the order they asked, each exactly as alone (the script runs
    the same arithmetic per key, and a key named twice sees its first decision). So N requests
    arriving together cost one round trip, not N. ``take`` (from a thread) is one decision per call.
    """

    def __init__(
        self, client: redis.Redis, *, prefix: str = REDIS_KEY_PREFIX, url: str | None = None, timeout_s: float = 0.5
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_TAKE_LUA)  # hashes locally; no round trip
        self._url = url
        self._timeout_s = timeout_s
        # One asyncio client per event loop: a connection belongs to the loop that opened it.
        self._sending: set[asyncio.Task[None]] = set()
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        # Per event loop: the decisions asked for in its current turn, sent at the next.
        self._waiting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Waiting]] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = 0.5, prefix: str = REDIS_KEY_PREFIX) -> RedisStore:
        """A store with a client that gives up quickly: a request waiting on a dead redis is
        worse than a prompt 503 (redis-py's default retries for seconds)."""
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            # One immediate retry covers a pooled connection that died with a redis restart.
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 1),
        )
        return cls(client, prefix=prefix, url=url, timeout_s=timeout_s)

    def key(self, identity: str) -> str:
        return self._prefix + identity

    def _args(self, now: float, allowance: Allowance) -> list:
        return [repr(float(now)), repr(float(allowance.per_minute)), allowance.burst, bucket_ttl_ms(allowance)]

    @property
    def awaitable(self) -> bool:
        return self._url is not None

    async def take_async(self, key: str, now: float, allowance: Allowance) -> Decision:
        """``take`` on the event loop (redis.asyncio), coalesced with every decision asked for
        in the same turn of the loop: one round trip for all of them (see the class docstring).

        Measured under load with two workers on two cores: the thread hop per decision cost
        more than the redis round trip it wrapped.
        """
        loop = asyncio.get_running_loop()
        waiting = self._waiting.get(loop)
        if waiting is None:
            waiting = self._waiting[loop] = []
            loop.call_soon(self._send, loop)  # after every callback of this turn has asked
        decided: asyncio.Future[Decision] = loop.create_future()
        waiting.append((key, now, allowance, decided))
        return await decided

    def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._waiting.pop(loop, [])
        if batch:
            task = loop.create_task(self._decide(loop, batch))
            self._sending.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(self._sending.discard)

    async def _decide(self, loop: asyncio.AbstractEventLoop, batch: list[_Waiting]) -> None:
        import redis.asyncio  # noqa: PLC0415 -- only a Redis-backed deployment needs the client

        script = self._async.get(loop)
        if script is None:
            assert self._url is not None, "take_async needs a store made with a url (see awaitable)"
            client = redis.asyncio.Redis.from_url(
                self._url,
                socket_timeout=self._timeout_s,
                socket_connect_timeout=self._timeout_s,
                retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 1),
            )
            script = self._async[loop] = client.register_script(_TAKE_LUA)
        keys = [self.key(key) for key, _, _, _ in batch]
        args = [a for _, now, allowance, _ in batch for a in self._args(now, allowance)]
        try:
            replies = await script(keys=keys, args=args)
        except redis.exceptions.RedisError as exc:
            failed = StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}")
            for *_, decided in batch:
                if not decided.done():
                    decided.set_exception(failed)
            return
        except BaseException as exc:  # cancelled with the loop, or a bug: no request waits forever
            for *_, decided in batch:
                if not decided.done():
                    decided.set_exception(StoreUnavailable(f"rate-limit decision failed: {type(exc).__name__}"))
            raise
        for i, (*_, decided) in enumerate(batch):
            if not decided.done():  # its request may have gone (cancelled); the token is taken either way
                decided.set_result(Decision(bool(replies[2 * i]), int(replies[2 * i + 1])))

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        try:
            allowed, retry_after = self._script(keys=[self.key(key)], args=self._args(now, allowance))
        except redis.exceptions.RedisError as exc:
            # Connection/timeout errors mostly, but also READONLY/OOM replies: in every case
            # we cannot decide, and the middleware must refuse.
            raise StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}") from exc
        return Decision(bool(allowed), int(retry_after))
