"""A round's decisions, waits and estimated starts compressed with LZ4 rather than pglz on
PostgreSQL 14+ built with LZ4 (issue 16, item 3).

A fill round at 10,000 pending jobs writes about 240 KB of JSON in these columns, which
PostgreSQL compresses when it stores them out of line: inserting one fill round's decisions and
waits took 16-38 ms with pglz and 11-22 ms with LZ4 (the same rows, runs alternated, on a loaded
2-core machine), for 68 KB stored instead of 55 KB; LZ4 also decompresses faster for the
dashboard and the queue. Rows already stored keep their compression; nothing changes on SQLite,
on an older PostgreSQL, or on one built without LZ4. Reversible: back to the server's default.
"""

from typing import Any

from django.db import migrations

COLUMNS = ("decisions", "waits", "estimated_starts")


def lz4_available(schema_editor: Any) -> bool:
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def set_compression(apps: Any, schema_editor: Any, method: str) -> None:
    if not lz4_available(schema_editor):
        return
    table = schema_editor.quote_name(apps.get_model("scheduling", "Round")._meta.db_table)
    for column in COLUMNS:
        schema_editor.execute(
            f"ALTER TABLE {table} ALTER COLUMN {schema_editor.quote_name(column)} SET COMPRESSION {method}"
        )


def to_lz4(apps: Any, schema_editor: Any) -> None:
    set_compression(apps, schema_editor, "lz4")


def to_default(apps: Any, schema_editor: Any) -> None:
    set_compression(apps, schema_editor, "default")


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0006_round_waits"),
    ]

    operations = [migrations.RunPython(to_lz4, to_default)]
