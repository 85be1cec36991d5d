"""Tenant members' API tokens kept as SHA-256 digests (cluster.api_tokens.ApiToken).

Existing plaintext tokens of DRF's ``authtoken`` app, where its table exists, are carried over as
digests (their holders keep using them) and deleted from that table.
"""

import hashlib

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

PLAINTEXT_TABLE = "authtoken_token"


def hash_plaintext_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if PLAINTEXT_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("cluster", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {PLAINTEXT_TABLE}")
        rows = cursor.fetchall()
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            digest=hashlib.sha256(key.encode()).hexdigest(),
            prefix=key[:6],
            created_at=created,
        )
        for key, user_id, created in rows
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {PLAINTEXT_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0005_node_executor_and_job_logs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                ("prefix", models.CharField(editable=False, max_length=6)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"verbose_name": "API token"},
        ),
        migrations.RunPython(hash_plaintext_tokens, migrations.RunPython.noop),
    ]
