"""The password backend of dashboard and admin logins (``AUTHENTICATION_BACKENDS``): Django's
``ModelBackend``, with the user of a logged-in session read by one plain statement.

``ModelBackend.get_user`` runs on every request with a session (``AuthenticationMiddleware``)
as ``User.objects.get(pk=…)``, whose compilation by the ORM cost more CPU than the database took
to answer it (about 0.3 ms a request on a 2-core machine, docs/PERFORMANCE.md §6). The same
statement is written here once from the model's table and columns and run as it is; who may
log in (``user_can_authenticate``: inactive users may not) and every permission check are
``ModelBackend``'s.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import connection

from cluster.compiled import meta


@cache
def _user_sql() -> str:
    """``SELECT every column of the user table WHERE its primary key = %s``."""
    model = get_user_model()
    q = connection.ops.quote_name
    columns = ", ".join(q(f.column) for f in meta(model).concrete_fields)
    return f"SELECT {columns} FROM {q(meta(model).db_table)} WHERE {q(meta(model).pk.column)} = %s"


class UserBackend(ModelBackend):
    """``ModelBackend`` whose :meth:`get_user` is one statement (the same row)."""

    def get_user(self, user_id: Any) -> Any:
        """The user of primary key ``user_id`` (already converted by ``django.contrib.auth``),
        or ``None`` when there is none or it may not log in (inactive)."""
        found = list(get_user_model()._default_manager.raw(_user_sql(), [user_id]))
        if not found:
            return None
        return found[0] if self.user_can_authenticate(found[0]) else None
