"""The jobs' tenants as the dashboard's placement reads learn them (``cluster.job_tenants``): each
job looked up once per process, a job deleted since left out, a saved job's tenant read-only in
the admin; and the quota use per GPU type that reads them (``over_quota``, docs/FAIRNESS.md §1:
a row for type T is held against the use on GPUs of type T). Cluster fixture: node-00 and
node-01, four V100s each."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.test import override_settings

from cluster import job_tenants
from cluster.models import GPU, Job, Node, Quota, Tenant
from scheduling.service import quota_use
from tests.frontend.conftest import make_job, place


def test_each_job_is_looked_up_once_and_a_deleted_one_is_left_out(
    cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant, django_assert_num_queries: Any
) -> None:
    a, c = make_job(tenant_a, "a"), make_job(tenant_c, "c")
    with django_assert_num_queries(1):
        assert dict(job_tenants.tenants_of([a.pk, c.pk])) == {a.pk: tenant_a.pk, c.pk: tenant_c.pk}
    with django_assert_num_queries(0):
        assert job_tenants.tenants_of([c.pk])[c.pk] == tenant_c.pk
    gone = make_job(tenant_a, "gone")
    gone_pk = gone.pk
    gone.delete()
    # rows (id, job, gpu): the tenant goes right after the job; the deleted job's row is dropped
    rows = [(7, a.pk, 3), (8, gone_pk, 4), (9, c.pk, 5)]
    with django_assert_num_queries(1):
        assert job_tenants.with_tenants(rows, 1) == [(7, a.pk, tenant_a.pk, 3), (9, c.pk, tenant_c.pk, 5)]


def test_the_memory_is_dropped_after_its_lifetime(
    cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant, monkeypatch: Any
) -> None:
    # a database emptied and refilled under the process: the same id, another tenant's job now
    # (simulated by moving the row, which nothing in the service does)
    job = make_job(tenant_a, "a")
    clock = [1000.0]
    monkeypatch.setattr(job_tenants, "monotonic", lambda: clock[0])
    assert job_tenants.tenants_of([job.pk])[job.pk] == tenant_a.pk
    Job.objects.filter(pk=job.pk).update(tenant=tenant_c)
    clock[0] += job_tenants.KEPT_S  # not yet past its lifetime: remembered
    assert job_tenants.tenants_of([job.pk])[job.pk] == tenant_a.pk
    clock[0] += 0.001
    assert job_tenants.tenants_of([job.pk])[job.pk] == tenant_c.pk


def test_many_jobs_are_looked_up_in_chunks(
    cluster: list[Node], tenant_a: Tenant, django_assert_num_queries: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(job_tenants, "LOOKUP_CHUNK", 2)
    jobs = [make_job(tenant_a, f"j{k}").pk for k in range(5)]
    with django_assert_num_queries(3):  # 2 + 2 + 1
        assert set(job_tenants.tenants_of(jobs).items()) >= {(j, tenant_a.pk) for j in jobs}


def test_a_saved_jobs_tenant_is_read_only_in_the_admin(cluster: list[Node], tenant_a: Tenant) -> None:
    job_admin = site.get_model_admin(Job)
    assert "tenant" not in job_admin.get_readonly_fields(None, None)
    assert "tenant" in job_admin.get_readonly_fields(None, make_job(tenant_a, "a"))


@pytest.mark.parametrize("policy", ["sjf-bsbf", "sjf-bsbf-fair"])
def test_a_gang_across_two_gpu_types_uses_one_gpu_of_each(
    policy: str, cluster: list[Node], tenant_a: Tenant
) -> None:
    # team-a: 1 guaranteed A100 and 1 guaranteed V100; its 2-GPU job holds one of each, alone
    GPU.objects.filter(node__name="node-01").update(gpu_type="a100")
    Quota.objects.filter(tenant=tenant_a).delete()
    Quota.objects.create(tenant=tenant_a, gpu_type="a100", guaranteed_gpus=1, borrow_limit=0)
    Quota.objects.create(tenant=tenant_a, gpu_type="v100", guaranteed_gpus=1, borrow_limit=0)
    gang = make_job(tenant_a, "gang", gpus=2)
    place(gang, GPU.objects.get(node__name="node-00", index=0))
    place(gang, GPU.objects.get(node__name="node-01", index=0))
    with override_settings(SHAREWISE_POLICY=policy):
        use = quota_use([tenant_a.pk])[tenant_a.pk]
    # each row held against its own type: 1 of 1 each, nobody over quota (the job's GPUs were
    # once all counted on the type of its last row: 2 of 1 on one type, over quota)
    assert {t: s.gpus_in_use for t, s in use.per_type.items()} == {"a100": 1.0, "v100": 1.0}
    assert use.total.gpus_in_use == 2.0 and not use.over_quota
