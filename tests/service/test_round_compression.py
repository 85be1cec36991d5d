"""A round's JSON columns are stored with LZ4 on PostgreSQL (migration ``scheduling.0007``): a
fill round's 240 KB of decisions and waits cost pglz about 1.5 times LZ4's server time.

PostgreSQL only (SQLite stores the JSON as it is); skipped on a server built without LZ4.
"""

from __future__ import annotations

import pytest
from django.db import connection

from scheduling.models import Round
from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.postgres]


def test_the_rounds_json_columns_use_lz4(db: None) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        if not cursor.fetchone()[0]:
            pytest.skip("this PostgreSQL was built without LZ4")
        cursor.execute(
            "SELECT attname, attcompression FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
            [Round._meta.db_table],
        )
        compression = dict(cursor.fetchall())
    # 'l': LZ4; '' would be the server's default (pglz unless configured otherwise)
    assert {c: compression[c] for c in ("decisions", "waits", "estimated_starts")} == {
        "decisions": "l",
        "waits": "l",
        "estimated_starts": "l",
    }
    assert compression["policy"] == ""  # a short text column: left alone
