"""The cluster map's cells kept per GPU (``frontend.payloads.cluster_map``) give the JSON built
from scratch, byte for byte, for an admin and two members, after random changes of the kinds a
round makes (a job placed beside another or alone, one ended, a GPU or node unhealthy, a round
recorded with new slowdowns for a pair, a tenant renamed), and only the GPUs a change touched
are built again."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest

from cluster.models import GPU, Job, Node, Placement, Tenant
from frontend.payloads import cluster_map, memo
from frontend.payloads.common import Viewer
from scheduling.models import Round
from tests.frontend.conftest import make_job

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def assert_same(viewers: list[Viewer], at: datetime) -> None:
    """The body with the kept cells equals the one built with none kept, for every viewer."""
    with mock.patch("django.utils.timezone.now", return_value=at):
        kept = [cluster_map.cluster_map_payload(v).json() for v in viewers]
        memo.forget()
        cluster_map.forget()
        afresh = [cluster_map.cluster_map_payload(v).json() for v in viewers]
        memo.forget()  # the next poll's body is built from the cells kept before this check
    assert kept == afresh


def _round(at: datetime, pairs: list[tuple[int, int, float, float]]) -> None:
    """A round that started those pairs (job, partner, ξ of job, ξ of partner)."""
    decisions = [
        {"action": "start", "job_id": a, "shares": [{"partner_id": b, "xi_self": xa, "xi_partner": xb}]}
        for a, b, xa, xb in pairs
    ]
    Round.objects.create(
        started_at=at,
        finished_at=at,
        policy="sjf-bsbf",
        duration_ms=1.0,
        n_started=len(pairs),
        n_waiting=0,
        n_preempted=0,
        decisions=decisions,
        waits={},
    )


def _change(rng: random.Random, gpus: list[GPU], tenants: list[Tenant], step: int, now: datetime) -> None:
    kind = rng.random()
    held = list(Placement.objects.filter(active=True).values_list("pk", "gpu_id", "slot", "job_id"))
    if kind < 0.4:  # a job placed on a free slot
        taken = {(g, s) for _, g, s, _ in held}
        free = [(g, s) for g in gpus for s in (0, 1) if (g.pk, s) not in taken]
        if free:
            on, slot = rng.choice(free)
            job = make_job(rng.choice(tenants), f"j{step}", status=Job.Status.RUNNING)
            Placement.objects.create(
                job=job, gpu=on, slot=slot, sub_batch=rng.choice((16, 32)), generation=1, created_at=now
            )
    elif kind < 0.65 and held:  # one ends
        pk = rng.choice(held)[0]
        Placement.objects.filter(pk=pk).update(active=False, ended_at=now)
    elif kind < 0.8:  # a round with new slowdowns for jobs sharing a GPU
        by_gpu: dict[int, list[int]] = {}
        for _, g, _, job in held:
            by_gpu.setdefault(g, []).append(job)
        pairs = [jobs for jobs in by_gpu.values() if len(jobs) == 2]
        chosen = rng.sample(pairs, min(len(pairs), 2))
        _round(now, [(a, b, rng.choice((1.1, 1.25, 1.7)), rng.choice((1.05, 1.4))) for a, b in chosen])
    elif kind < 0.9:  # a GPU, or a node, marked unhealthy or healthy again
        if rng.random() < 0.5:
            GPU.objects.filter(pk=rng.choice(gpus).pk).update(healthy=rng.random() < 0.5)
        else:
            status = rng.choice((Node.Status.UNHEALTHY, Node.Status.READY))
            Node.objects.filter(pk=rng.choice(gpus).node_id).update(status=status)
    else:  # a tenant renamed
        t = rng.choice(tenants)
        Tenant.objects.filter(pk=t.pk).update(name=f"{t.name.split('~')[0]}~{step}")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_cells_equal_from_scratch_over_random_changes(
    viewers: list[Viewer], tenant_a: Tenant, tenant_c: Tenant, seed: int
) -> None:
    rng = random.Random(seed)
    gpus = list(GPU.objects.order_by("node__name", "index"))
    now = NOW
    assert_same(viewers, now)
    for step in range(30):
        now += timedelta(seconds=rng.choice((1, 5, 30)))
        for _ in range(rng.randint(1, 3)):
            _change(rng, gpus, [tenant_a, tenant_c], step, now)
        assert_same(viewers, now)


def test_only_the_gpu_a_round_changed_is_built_again(
    viewers: list[Viewer], tenant_a: Tenant, tenant_c: Tenant
) -> None:
    gpus = list(GPU.objects.order_by("node__name", "index"))
    job = make_job(tenant_a, "a1", status=Job.Status.RUNNING)
    Placement.objects.create(job=job, gpu=gpus[0], slot=0, sub_batch=32, generation=1, created_at=NOW)
    admin = viewers[0]
    built = mock.Mock(wraps=cluster_map._cell)  # noqa: SLF001 - the builder under test
    with (
        mock.patch.object(cluster_map, "_cell", built),
        mock.patch("django.utils.timezone.now", return_value=NOW),
    ):
        cluster_map.cluster_map_payload(admin)
        assert built.call_count == len(gpus)  # nothing kept yet: every GPU
        other = make_job(tenant_c, "c1", status=Job.Status.RUNNING)
        Placement.objects.create(job=other, gpu=gpus[3], slot=0, sub_batch=32, generation=1, created_at=NOW)
        body = cluster_map.cluster_map_payload(admin)
        assert built.call_count == len(gpus) + 1  # only node-00:3
    assert "1 shared" not in body["summary"] and "2 in use" in body["summary"]


def test_a_new_round_s_slowdown_of_a_kept_pair_is_shown(viewers: list[Viewer], tenant_a: Tenant) -> None:
    gpus = list(GPU.objects.order_by("node__name", "index"))
    a, b = (make_job(tenant_a, n, status=Job.Status.RUNNING) for n in ("a1", "a2"))
    for slot, job in enumerate((a, b)):
        Placement.objects.create(job=job, gpu=gpus[0], slot=slot, sub_batch=32, generation=1, created_at=NOW)
    admin = viewers[0]

    def shown() -> list[Any]:
        with mock.patch("django.utils.timezone.now", return_value=NOW):
            return [row[4] for row in cluster_map.cluster_map_payload(admin)["tables"]["cluster_map"]["rows"]]

    # moments no other test's round has (rounds are parsed once per process, by id and start)
    later = NOW + timedelta(days=10)
    _round(later, [(a.pk, b.pk, 1.7, 1.25)])
    assert shown() == [1.7, 1.25]
    _round(later + timedelta(seconds=1), [(a.pk, b.pk, 1.1, 1.4)])  # the same rows, another round
    assert shown() == [1.1, 1.4]
