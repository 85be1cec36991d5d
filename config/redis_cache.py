"""Django's Redis cache backend, with one Redis client object per connection pool instead of one
per cache call.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` for every ``get``, ``set``
or ``incr``; redis-py's constructor copies its table of response callbacks each time, which cost
about as much CPU as the command itself (issue 16: a submission makes 2-4 cache calls). A
``redis.Redis`` over a connection pool is thread-safe (redis-py's documentation), so one per pool
serves every thread of the process; connections still come from the pool, which redis-py resets
in a forked child.

``incr`` is one round trip: a server-side script increments the key only if it exists (Django's
asks ``EXISTS`` and then ``INCRBY``: two round trips, and a key that expires between the two is
created again by ``INCRBY`` without an expiry).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

#: ``INCRBY`` of an existing key (nil when absent): Django's ``incr`` contract in one command.
INCR_EXISTING = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return false
"""


class ReusedClientRedisCacheClient(RedisCacheClient):
    """``RedisCacheClient`` whose ``get_client`` returns the same ``redis.Redis`` for a pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._scripts: dict[int, Any] = {}
        self._lock = threading.Lock()

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        """The client of the pool Django would pick (the primary for a write, any server for a
        read), made on first use."""
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            with self._lock:
                client = self._clients.get(index)
                if client is None:
                    if index not in self._pools:  # as RedisCacheClient._get_connection_pool
                        self._pools[index] = self._pool_class.from_url(
                            self._servers[index], **self._pool_options
                        )
                    client = self._clients[index] = self._client(connection_pool=self._pools[index])
                    self._scripts[index] = client.register_script(INCR_EXISTING)
        return client

    def incr(self, key: Any, delta: int) -> int:
        """``key``'s value plus ``delta``, stored; ``ValueError`` when the key does not exist (as
        Django's), in one atomic round trip (``EVALSHA`` of :data:`INCR_EXISTING`)."""
        client = self.get_client(key, write=True)
        script = self._scripts[self._get_connection_pool_index(True)]
        value = script(keys=[key], args=[delta], client=client)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return int(value)


class ReusedClientRedisCache(RedisCache):
    """Django's ``RedisCache`` over :class:`ReusedClientRedisCacheClient` (same options, same
    ``CACHE_URL``); ``config.settings`` selects it in place of Django's."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
