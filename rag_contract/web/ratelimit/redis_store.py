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

# KEYS[1] bucket hash {tokens, ts}; ARGV: now, per_minute, burst, ttl_ms.
# Mirrors refill_and_take exactly. Numbers are stored with %.17g so a float survives the
# round trip through a redis string bit for bit (Lua's default tostring keeps only 14 digits
# and the two stores would drift apart).
_TAKE_LUA = """
local now = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / 60.0
local capacity = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
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
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', last))
redis.call('PEXPIRE', KEYS[1], ttl_ms)
return {allowed, retry}
"""


class RedisStore:
    """Buckets in redis, shared by every instance of the service.

    One EVALSHA per decision does refill and take atomically, so concurrent requests from
    any number of instances never over-admit. ``now`` comes from the caller (use wall-clock
    ``time.time`` in production so instances agree; a frozen clock in tests). Keys are
    ``prefix + identity`` and expire ``bucket_ttl_ms`` after their last use. Any redis
    failure raises ``StoreUnavailable``.
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
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

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
        """``take`` on the event loop (redis.asyncio): no worker-thread hop per request.

        Measured under load with two workers on two cores: the thread hop per decision cost
        more than the redis round trip it wrapped.
        """
        import redis.asyncio  # noqa: PLC0415 -- only a Redis-backed deployment needs the client

        loop = asyncio.get_running_loop()
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
        try:
            allowed, retry_after = await script(keys=[self.key(key)], args=self._args(now, allowance))
        except redis.exceptions.RedisError as exc:
            raise StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}") from exc
        return Decision(bool(allowed), int(retry_after))

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        try:
            allowed, retry_after = self._script(keys=[self.key(key)], args=self._args(now, allowance))
        except redis.exceptions.RedisError as exc:
            # Connection/timeout errors mostly, but also READONLY/OOM replies: in every case
            # we cannot decide, and the middleware must refuse.
            raise StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}") from exc
        return Decision(bool(allowed), int(retry_after))
