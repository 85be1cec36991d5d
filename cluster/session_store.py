"""Django's database session store (``SESSION_ENGINE = "cluster.session_store"``), its load one
plain statement.

Every dashboard poll and admin page reads its session. Django's store builds that read through
the ORM (``Session.objects.get(session_key=…, expire_date__gt=now)``), whose compilation cost
more CPU than the database took to answer it (about 0.3 ms a request on a 2-core machine,
docs/PERFORMANCE.md §6). Here the same statement is written once from the model's own table and
column names and run as it is; saving, creating, expiry and the session's encoding are Django's.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.sessions.backends import db
from django.db import connection
from django.utils import timezone

from cluster.compiled import meta


@cache
def _load_sql() -> str:
    """``SELECT key, data, expiry FROM the session table WHERE key = %s AND expiry > %s``."""
    model = db.SessionStore.get_model_class()
    q = connection.ops.quote_name
    key, data, expiry = (
        meta(model).get_field(n).column for n in ("session_key", "session_data", "expire_date")
    )
    return (
        f"SELECT {q(key)}, {q(data)}, {q(expiry)} FROM {q(meta(model).db_table)} "
        f"WHERE {q(key)} = %s AND {q(expiry)} > %s"
    )


class SessionStore(db.SessionStore):
    """:class:`django.contrib.sessions.backends.db.SessionStore` with :meth:`_get_session_from_db`
    one statement (same rows: the session of this key that has not expired)."""

    def _get_session_from_db(self) -> Any:
        """The unexpired session row of this key (a ``Session``), or ``None`` (and no key from
        now on), as Django's store answers."""
        if self.session_key is None:  # no key, or one Django's validation refused
            return None
        if "\x00" in self.session_key:
            # a crafted cookie: PostgreSQL refuses NUL in text (a DataError, so a 500), SQLite
            # finds no row; no key Django makes has one, so it is no session on either
            self._session_key = None
            return None
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        found = list(self.model.objects.raw(_load_sql(), [self.session_key, now]))
        if not found:
            self._session_key = None
            return None
        return found[0]
