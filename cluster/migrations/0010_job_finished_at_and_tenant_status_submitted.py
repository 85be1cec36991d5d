from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0009_job_indexes_without_copies"),
    ]

    # For the dashboard's usage spans (scheduling.service.gpu_hours.pending_span_sql and
    # closed_runs): submitted_at last in the tenant's index, so a tenant's earliest pending (or
    # running) job is the first entry of its (tenant, status) range, not a scan of them all; the
    # wider index first, so the tenant's lookups and the cascade always have one, then the old
    # one it leads is dropped. And finished_at indexed: the jobs finished after a cutoff and the
    # fingerprint of a closed range read the few rows they need.
    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["tenant", "status", "submitted_at"], name="job_tenant_status_submitted"),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="job_tenant_status",
        ),
        migrations.AlterField(
            model_name="job",
            name="finished_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
    ]
