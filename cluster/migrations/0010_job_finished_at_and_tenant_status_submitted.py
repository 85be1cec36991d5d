from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0009_job_indexes_without_copies"),
    ]

    # The wider tenant index first, so the tenant's lookups and the cascade always have one; then
    # the old one, which it leads, is dropped (every insert and status update still writes one).
    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["tenant", "status", "submitted_at"], name="job_tenant_status_submitted"),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="job_tenant_status",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["finished_at"], name="job_finished_at"),
        ),
    ]
