"""What the dashboard and the job API show of a round does not depend on how the round's waits
are stored: a real round's row (waits packed in ``Round.waits``, scheduling/round_waits.py) and
the same round as the code before the change wrote it (every decision a dict in
``Round.decisions``, ``waits`` empty as migration 0006 leaves old rows) give the same bodies.

The cluster: node-00 and node-01, four 16,000 MB V100s each (8 GPUs); team-a (Alice) and team-c
(Charlie), both allowed the whole cluster here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from cluster.models import Job, Node, Quota, Tenant
from scheduling import service
from scheduling.models import Round
from tests.api.conftest import JOBS_URL, token_client
from tests.frontend.conftest import make_job

T0 = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
PANELS = (("decisions", {"rounds": 10}), ("queue", {}))


def bodies(web: Client, api: Any, jobs: list[Job]) -> dict[str, Any]:
    """The decisions and queue panels as ``web`` sees them (their generation time left out), and
    each job's status, pending reason and estimated start as the API shows them to ``api`` (a
    member's client; ``None``: none, the job API is the tenants')."""
    out: dict[str, Any] = {}
    for name, params in PANELS:
        response = web.get(f"/dashboard/api/{name}.json", params)
        assert response.status_code == 200, response.content
        body = response.json()
        body.pop("generated_at")
        out[name] = body
    for job in jobs if api is not None else ():
        response = api.get(f"{JOBS_URL}{job.pk}/")
        if response.status_code != 200:  # another tenant's job
            out[job.name] = response.status_code
            continue
        shown = response.json()
        out[job.name] = (shown["status"], shown["pending_reason"], shown["estimated_start_at"])
    return out


def as_old_row(record: Round) -> Round:
    """``record`` written again as the code before ``Round.waits`` wrote it (a new row: the
    readers' caches are keyed by primary key), the packed row deleted."""
    fields = {
        f.name: getattr(record, f.name) for f in Round._meta.concrete_fields if f.name not in ("id", "waits")
    }
    fields["decisions"] = record.decision_list()
    old = Round.objects.create(**fields)
    record.delete()
    return old


@pytest.mark.django_db
def test_a_packed_round_and_the_same_round_stored_the_old_way_show_the_same(
    tenant_a: Tenant,
    tenant_c: Tenant,
    cluster: list[Node],
    alice: Any,
    charlie: Any,
    admin_web: Client,
    alice_web: Client,
    charlie_web: Client,
    settings: Any,
) -> None:
    """SJF over six jobs on 8 GPUs, none able to share: the two shortest (4 + 2 GPUs) start, then
    the 8-GPU and the two 4-GPU jobs wait (2 GPUs idle) and the last, of 2 GPUs, starts. Admin,
    Alice and Charlie see the same panels, and Alice and Charlie the same API answers, from both
    rows; the queue's reasons are the round's, in its order."""
    settings.SHAREWISE_HEARTBEAT_TIMEOUT_S = 10 * 86400.0  # no agent: the nodes stay reachable
    Quota.objects.update(guaranteed_gpus=8, borrow_limit=None)
    spec = [  # (tenant, name, GPUs, iteration time s): 1,000 iterations each
        (tenant_a, "a-short", 4, 0.1),
        (tenant_c, "c-short", 2, 0.2),
        (tenant_a, "a-gang", 8, 0.3),
        (tenant_c, "c-four", 4, 0.4),
        (tenant_a, "a-four", 4, 0.5),
        (tenant_c, "c-two", 2, 0.6),
    ]
    jobs = [
        make_job(
            tenant,
            name,
            gpus=gpus,
            iteration_time_s=iter_s,
            gpu_memory_mb=15_000,  # too big to share a GPU: exclusive starts only
            submitted_at=T0 - timedelta(minutes=10 - i),
        )
        for i, (tenant, name, gpus, iter_s) in enumerate(spec)
    ]
    record = service.run_round(now=T0, policy="sjf")
    assert record is not None and record.pk is not None
    started = {d["job_id"] for d in record.decisions if d["action"] == "start"}
    assert started == {jobs[0].pk, jobs[1].pk, jobs[5].pk}  # 4 + 2 + 2 GPUs: the cluster is full
    waits = record.wait_decisions()
    assert [j for j, _ in waits] == [jobs[2].pk, jobs[3].pk, jobs[4].pk]  # SJF order: shortest first
    assert record.waits == {  # each distinct reason once
        "job_ids": [jobs[2].pk, jobs[3].pk, jobs[4].pk],
        "reasons": ["needs 8 GPUs, 2 idle", "needs 4 GPUs, 2 idle"],
        "reason_ids": [0, 1, 1],
    }
    assert not any(d["action"] == "wait" for d in record.decisions)

    viewers = {"admin": admin_web, "alice": alice_web, "charlie": charlie_web}
    apis = {"admin": None, "alice": token_client(alice), "charlie": token_client(charlie)}
    packed = {who: bodies(web, apis[who], jobs) for who, web in viewers.items()}
    queue = packed["admin"]["queue"]["tables"]["queue"]
    reasons = [row[queue["columns"].index("reason")] for row in queue["rows"]]
    assert reasons == [r for _, r in waits]
    assert packed["alice"]["a-gang"][:2] == ("pending", "needs 8 GPUs, 2 idle")
    # a-short's 1,000 x 0.1 s end at T0 + 100 s frees 4 GPUs: c-four starts at that round
    status, reason, estimate = packed["charlie"]["c-four"]
    assert (status, reason) == ("pending", "needs 4 GPUs, 2 idle")
    assert datetime.fromisoformat(estimate) == T0 + timedelta(seconds=100)
    assert packed["alice"]["c-four"] == 404 and packed["charlie"]["a-gang"] == 404

    as_old_row(record)
    assert Round.objects.get().waits == {}
    assert {who: bodies(web, apis[who], jobs) for who, web in viewers.items()} == packed
