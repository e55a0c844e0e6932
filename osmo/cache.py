"""Django's Redis cache backend, keeping one Redis client per connection pool.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` for every cache call, and each
construction copies the library's table of response callbacks (about 170 entries): ~0.06 ms of CPU
per call, three calls per API request (the token-failure throttle and the user throttle). A
``redis.Redis`` is safe to share between threads (each command takes a connection from the pool), so
the client is built once per pool, which lives as long as the process's pools already do.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends import redis as django_redis


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        django_client: Any = self  # its private helpers are not in django-stubs
        index = django_client._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            pool = django_client._get_connection_pool(write)
            client = self._clients[index] = django_client._client(connection_pool=pool)
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
