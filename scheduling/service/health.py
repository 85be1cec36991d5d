"""Whether this process reaches the services it depends on: the database always, the shared cache
(``CACHE_URL``) and the Celery broker (``REDIS_URL``) when they are configured.

``/readyz`` answers from :func:`readiness`; the API's exception handler turns an outage met while
serving a request (:data:`OUTAGE_ERRORS`) into ``503`` with :func:`outage_message`; callers for
whom the cache is an optimisation (the round debounce, the heartbeat's second-miss memory) catch
:data:`CACHE_ERRORS` and carry on without it, so a web process that lost Redis never makes a
healthy node look silent.
"""

from __future__ import annotations

import logging
import uuid

import redis.exceptions
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from kombu.exceptions import OperationalError as BrokerError

from scheduling.service.dispatch import broker_configured

log = logging.getLogger(__name__)

#: What a Redis cache raises when its server cannot be reached or does not answer in time.
CACHE_ERRORS: tuple[type[Exception], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
#: Errors that mean a service is out rather than a request is wrong (the API answers 503).
OUTAGE_ERRORS: tuple[type[Exception], ...] = (*CACHE_ERRORS, BrokerError, OperationalError, InterfaceError)
#: Seconds a readiness probe of the broker waits for a connection **(ours)**.
BROKER_PROBE_TIMEOUT_S = 2.0
#: Cache backends local to the process: nothing to reach.
LOCAL_CACHES = ("LocMemCache", "DummyCache")


def outage_message(exc: BaseException) -> str:
    """What a client is told about an outage (no host names or addresses; the log has them)."""
    if isinstance(exc, CACHE_ERRORS):
        what = "the shared cache (CACHE_URL) is unreachable from this server"
    elif isinstance(exc, BrokerError):
        what = "the message broker (REDIS_URL) is unreachable from this server"
    else:
        what = "the database is unreachable from this server"
    return f"service unavailable: {what}; retry later"


def cache_is_shared() -> bool:
    """Whether the default cache lives in another process (e.g. Redis), so it can be unreachable."""
    backend = str(settings.CACHES["default"]["BACKEND"])
    return not backend.endswith(LOCAL_CACHES)


def probe_database() -> str | None:
    """``None`` when the database answers ``SELECT 1``, else why not."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"database unreachable: {exc}"
    return None


def probe_cache() -> str | None:
    """``None`` when the shared cache stores and returns a value (or is local), else why not."""
    if not cache_is_shared():
        return None
    key = f"sharewise:readyz:{uuid.uuid4().hex}"
    try:
        cache.set(key, 1, timeout=5)
        ok = cache.get(key) == 1
        cache.delete(key)
    except Exception as exc:  # any backend's error: the probe reports it, never raises
        return f"cache unreachable: {exc}"
    return None if ok else "cache unreachable: a value written was not read back"


def probe_broker() -> str | None:
    """``None`` when the Celery broker accepts a connection (or none is configured), else why not."""
    if not broker_configured():
        return None
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_PROBE_TIMEOUT_S
            )
    except Exception as exc:  # kombu and its transports raise several kinds
        return f"broker unreachable: {exc}"
    return None


def readiness() -> tuple[bool, dict[str, str]]:
    """``(ready, body)`` of ``/readyz``: the database, then the cache and the broker when configured.

    ``body`` names what was checked (``database``: the vendor; ``cache`` / ``broker``: ``"ok"`` or
    ``"not configured"``) or, when something fails, ``status: unavailable`` and ``error``.
    """
    checks = (
        ("database", probe_database, connection.vendor),
        ("cache", probe_cache, "ok" if cache_is_shared() else "not configured"),
        ("broker", probe_broker, "ok" if broker_configured() else "not configured"),
    )
    body = {"status": "ok"}
    for name, probe, ok in checks:
        error = probe()
        if error is not None:
            log.warning("not ready: %s", error)
            return False, {"status": "unavailable", "error": error}
        body[name] = ok
    return True, body
