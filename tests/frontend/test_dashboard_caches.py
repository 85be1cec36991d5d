"""What the dashboard's endpoints reuse between polls equals what they would build from scratch:
the quota panel's GPU-hours from the cached charge (``usage_windows(cached=True)``) beside the
charge afresh, after placements start, end, are inserted into the past or deleted with their
job; the windowed fairness's tenants with work from the collapsed job spans beside the spans of
every job; the cluster map's and the decisions' kept bodies (``frontend.payloads.memo``) beside
bodies built again, after each kind of change; and the timeline cut to its latest bars in the
database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from cluster.models import GPU, Job, Node, Placement
from frontend.payloads import cluster_map, decisions, memo, timeline
from frontend.payloads.common import viewer_of
from scheduling.core.usage import active_tenants
from scheduling.models import Round
from scheduling.service.gpu_hours import usage_windows
from tests.frontend.conftest import gpu, make_job, place
from tests.frontend.test_endpoints import get, record_round, table

WINDOWS = (7200, 86400)


def ended(job: Job, on: GPU, begin: timedelta, end: timedelta, **extra: Any) -> Placement:
    """A placement of ``job`` on ``on`` from ``now − begin`` to ``now − end``, and the job done."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.SUCCEEDED, started_at=now - begin, finished_at=now - end
    )
    return Placement.objects.create(
        job=job,
        gpu=on,
        generation=1,
        sub_batch=64,
        active=False,
        created_at=now - begin,
        ended_at=now - end,
        **extra,
    )


def assert_cached_equals_fresh() -> None:
    now = timezone.now()
    cached, fresh = usage_windows(WINDOWS, now, cached=True), usage_windows(WINDOWS, now, cached=False)
    assert cached.per_tenant.keys() == fresh.per_tenant.keys()
    for t, windows in fresh.per_tenant.items():
        for c, f in zip(cached.per_tenant[t], windows, strict=True):
            assert c.gpu_hours == pytest.approx(f.gpu_hours, rel=1e-9, abs=1e-12), (t, c.window_s)
            assert c.quota_gpu_hours == f.quota_gpu_hours
    assert [f.tenants for f in cached.fairness] == [f.tenants for f in fresh.fairness]
    for c, f in zip(cached.fairness, fresh.fairness, strict=True):
        assert c.jain_index == pytest.approx(f.jain_index, rel=1e-9)


def test_the_quota_panels_cached_gpu_hours_follow_every_change(
    cluster: list[Node], tenant_a: Any, tenant_c: Any, admin_web: Client
) -> None:
    a_old, a_run = make_job(tenant_a, "a-old"), make_job(tenant_a, "a-run")
    c_old = make_job(tenant_c, "c-old")
    ended(a_old, gpu("node-00", 0), timedelta(hours=5), timedelta(hours=3))  # 2 GPU-h, closed
    ended(c_old, gpu("node-00", 1), timedelta(hours=1), timedelta(minutes=30))  # 0.5 GPU-h, closed
    place(a_run, gpu("node-00", 2), since=timezone.now() - timedelta(hours=1))  # 1 GPU-h so far, open
    assert_cached_equals_fresh()
    rows = {r["tenant"]: r for r in table(get(admin_web, "quota"), "quota_windows")}
    assert rows["team-a"]["GPU-hours (last 24 h)"] == pytest.approx(3.0, abs=1e-3)
    assert rows["team-a"]["GPU-hours (last 2 h)"] == pytest.approx(1.0, abs=1e-3)
    assert rows["team-c"]["GPU-hours (last 2 h)"] == pytest.approx(0.5, abs=1e-3)
    # a placement committed late into the closed past: team-c 4 → 3 h ago, 1 GPU-h more in 24 h
    ended(make_job(tenant_c, "c-late"), gpu("node-00", 3), timedelta(hours=4), timedelta(hours=3))
    assert_cached_equals_fresh()
    rows = {r["tenant"]: r for r in table(get(admin_web, "quota"), "quota_windows")}
    assert rows["team-c"]["GPU-hours (last 24 h)"] == pytest.approx(1.5, abs=1e-3)
    # the running job ends now; another started on its GPU 6 min ago (so they shared it for
    # 6 min, no slowdowns known: ½ each): the open part changed
    Placement.objects.filter(job=a_run).update(active=False, ended_at=timezone.now())
    place(make_job(tenant_c, "c-new"), gpu("node-00", 2), since=timezone.now() - timedelta(minutes=6))
    assert_cached_equals_fresh()
    # a finished job deleted (its placement with it): its 2 GPU-h leave team-a's 24 h, which
    # keeps a-run's 54 min alone + 6 min at ½ = 0.95 GPU-h
    a_old.delete()
    assert_cached_equals_fresh()
    rows = {r["tenant"]: r for r in table(get(admin_web, "quota"), "quota_windows")}
    assert rows["team-a"]["GPU-hours (last 24 h)"] == pytest.approx(0.95, abs=1e-3)
    assert rows["team-c"]["GPU-hours (last 24 h)"] == pytest.approx(1.55, abs=1e-3)  # 0.5 + 1 + 0.05


def test_windowed_fairness_counts_waiting_jobs_as_the_spans_of_every_job(
    cluster: list[Node], tenant_a: Any, tenant_c: Any
) -> None:
    now = timezone.now()
    # team-a: two jobs waiting since 13 h and 1 h ago (active in 24 h: 13 h ≥ 12 h), one done
    make_job(tenant_a, "a-wait", submitted_at=now - timedelta(hours=13))
    make_job(tenant_a, "a-new", submitted_at=now - timedelta(hours=1))
    done = make_job(tenant_a, "a-done", submitted_at=now - timedelta(hours=20))
    Job.objects.filter(pk=done.pk).update(status=Job.Status.SUCCEEDED, finished_at=now - timedelta(hours=19))
    # team-c: waiting 11 h (not enough for 24 h alone), a finished job 5 h → 3 h ago (2 h more)
    make_job(tenant_c, "c-wait", submitted_at=now - timedelta(hours=11))
    c_done = make_job(tenant_c, "c-done", submitted_at=now - timedelta(hours=14))
    Job.objects.filter(pk=c_done.pk).update(status=Job.Status.FAILED, finished_at=now - timedelta(hours=12))
    # and a cancelled job that never finished: not work
    make_job(tenant_c, "c-gone", status=Job.Status.CANCELLED, submitted_at=now - timedelta(hours=23))
    spans = []
    for tenant_id, submitted, finished, status in Job.objects.values_list(
        "tenant_id", "submitted_at", "finished_at", "status"
    ):
        if finished is None and status not in Job.ACTIVE_STATUSES:
            continue
        end = now if finished is None else finished
        spans.append((str(tenant_id), submitted.timestamp(), end.timestamp()))
    usage = usage_windows(WINDOWS, now)
    for window, fair in zip(WINDOWS, usage.fairness, strict=True):
        from_scratch = active_tenants(spans, now.timestamp() - window, now.timestamp())
        assert set(fair.tenants) == {int(t) for t in from_scratch}
    # by hand: in 2 h both have work (a-wait and c-wait cover it all)
    assert usage.fairness[0].tenants == tuple(sorted((tenant_a.pk, tenant_c.pk)))
    # in 24 h: team-a 13 h waiting + 20 → 19 h ago = 14 h ≥ 12 h; team-c 11 h + 14 → 12 h ago = 13 h
    assert usage.fairness[1].tenants == tuple(sorted((tenant_a.pk, tenant_c.pk)))
    Job.objects.filter(pk=c_done.pk).delete()  # team-c now has only its 11 h
    assert usage_windows(WINDOWS, now).fairness[1].tenants == (tenant_a.pk,)


def test_finished_jobs_merged_per_tenant_in_the_database_keep_their_gaps(
    cluster: list[Node], tenant_a: Any, tenant_c: Any
) -> None:
    """The finished jobs' spans come merged into runs per tenant (``gpu_hours._RUNS_SQL``): a run
    must not bridge a tenant's own gap, nor one another tenant's spans cover."""
    now = timezone.now()

    def finished(tenant: Any, name: str, since_h: float, until_h: float) -> None:
        job = make_job(tenant, name, submitted_at=now - timedelta(hours=since_h))
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.SUCCEEDED, finished_at=now - timedelta(hours=until_h)
        )

    # team-c: 23 → 20 h ago, and 6 → 4 h ago overlapping 5 → 1.5 h ago (one run of 4.5 h), and
    # 4 → 3 h ago nested in it: 3 + 4.5 = 7.5 h of 24 (not active; 22.5 h if the gap were bridged)
    for name, since_h, until_h in (("c1", 23, 20), ("c2", 6, 4), ("c3", 5, 1.5), ("c4", 4, 3)):
        finished(tenant_c, name, since_h, until_h)
    # team-a: 22 → 5 h ago covers team-c's gap (17 h: active in 24 h), then 2 → 1 h ago touching
    # 1 h → now (2 h of the last 2 h: active there too)
    finished(tenant_a, "a1", 22, 5)
    finished(tenant_a, "a2", 2, 1)
    finished(tenant_a, "a3", 1, 0)
    spans = [
        (str(t), s.timestamp(), f.timestamp())
        for t, s, f in Job.objects.values_list("tenant_id", "submitted_at", "finished_at")
    ]
    usage = usage_windows(WINDOWS, now)
    for window, fair in zip(WINDOWS, usage.fairness, strict=True):
        from_scratch = active_tenants(spans, now.timestamp() - window, now.timestamp())
        assert set(fair.tenants) == {int(t) for t in from_scratch}
    # by hand: 2 h — team-a 2 h (active), team-c 2 → 1.5 h ago only 0.5 h; 24 h — team-a 19 h,
    # team-c 7.5 h
    assert usage.fairness[0].tenants == (tenant_a.pk,)
    assert usage.fairness[1].tenants == (tenant_a.pk,)


def _without_time(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "generated_at"}


def _afresh(client: Client) -> dict[str, Any]:
    memo.forget()
    return _without_time(get(client, "cluster-map"))


def test_the_kept_cluster_map_is_built_again_whenever_its_rows_change(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[int] = []
    build = cluster_map._body
    monkeypatch.setattr(cluster_map, "_body", lambda *a: builds.append(1) or build(*a))
    first = get(admin_web, "cluster-map")
    again = get(admin_web, "cluster-map")
    assert len(builds) == 1  # nothing changed: the kept body, a new generated_at
    assert _without_time(again) == _without_time(first) and again["generated_at"] >= first["generated_at"]
    assert admin_web.get("/dashboard/api/cluster-map.json").content.decode().count('"generated_at"') == 1
    # read as a dict (decoded from the kept JSON), the kept body is the one built
    admin = viewer_of(get_user_model().objects.get(username="root-admin"))
    assert _without_time(dict(cluster_map.cluster_map_payload(admin))) == _without_time(first)
    # a member has an entry of her own: another tenant's job stays hidden
    assert "c-train" not in str(get(alice_web, "cluster-map")) and "c-train" in str(first)
    changes = [
        lambda: Placement.objects.filter(job=shared_cluster["c-train"]).update(active=False),
        lambda: GPU.objects.filter(node__name="node-00", index=3).update(healthy=False),
        lambda: Node.objects.filter(name="node-00").update(status=Node.Status.UNHEALTHY),
        lambda: Job.objects.filter(pk=shared_cluster["a-solo"].pk).update(name="a-renamed"),
        lambda: Round.objects.create(
            started_at=timezone.now(),
            finished_at=timezone.now(),
            policy="fifo",
            duration_ms=1.0,
            decisions=[],
        ),
    ]
    before = _without_time(first)
    for change in changes:
        change()
        kept = _without_time(get(admin_web, "cluster-map"))
        assert kept == _afresh(admin_web)
        assert kept != before or change is changes[-1]  # a round without shares shows the same
        before = kept
    assert "a-renamed" in str(before) and "unhealthy" in str(before)


def test_the_timeline_draws_the_running_and_latest_bars_and_counts_the_rest(
    cluster: list[Node], tenant_a: Any, admin_web: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline, "MAX_BARS", 2)
    run, late, early = (make_job(tenant_a, n) for n in ("a-run", "a-late", "a-early"))
    ended(early, gpu("node-00", 1), timedelta(minutes=30), timedelta(minutes=20))
    ended(late, gpu("node-00", 2), timedelta(minutes=40), timedelta(minutes=10))
    place(run, gpu("node-00", 0), since=timezone.now() - timedelta(minutes=5))
    body = get(admin_web, "timeline")
    assert [r["job"] for r in table(body, "timeline")] == [f"job {run.pk} a-run", f"job {late.pk} a-late"]
    assert body["tables"]["timeline"]["note"] == "1 placements that ended earlier not drawn."
    assert body["summary"].startswith("2 placements on 2 GPUs in the last 60 min; 0 shared intervals")
    (bars,) = body["figures"]["timeline"]["data"]
    assert bars["text"] == [f"job {run.pk} a-run", f"job {late.pk} a-late"]
    assert [c[1] for c in bars["customdata"]] == [r["end"] for r in table(body, "timeline")]
    # durations in ms: the running bar about 5 min (to the request's now), the ended one 30 min
    assert abs(bars["x"][0] - 300_000) < 10_000 and bars["x"][1] == 1_800_000


def test_the_kept_decisions_are_built_again_when_a_round_or_a_name_they_show_changes(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[int] = []
    build = decisions._body
    monkeypatch.setattr(decisions, "_body", lambda *a: builds.append(1) or build(*a))
    record_round(shared_cluster, ["a-wait", "c-wait"])
    first, mine = get(admin_web, "decisions"), get(alice_web, "decisions")
    assert _without_time(get(admin_web, "decisions")) == _without_time(first) and len(builds) == 2
    # Alice's own entry: C's job and the job its reason cites stay hidden from her
    assert "c-wait" not in str(mine) and "c-wait" in str(first)

    def afresh(client: Client) -> dict[str, Any]:
        memo.forget()
        return _without_time(get(client, "decisions"))

    changes = [
        lambda: Job.objects.filter(pk=shared_cluster["a-train"].pk).update(name="a-renamed"),  # a shown name
        lambda: record_round(shared_cluster, ["c-wait"]),  # a new round
        # a-wait finished long before the rounds shown: no longer among Alice's jobs there
        lambda: Job.objects.filter(pk=shared_cluster["a-wait"].pk).update(
            status=Job.Status.CANCELLED, finished_at=timezone.now() - timedelta(days=1)
        ),
    ]
    before = {"admin": _without_time(first), "alice": _without_time(mine)}
    for change in changes:
        change()
        for who, client in (("admin", admin_web), ("alice", alice_web)):
            kept = _without_time(get(client, "decisions"))
            assert kept == afresh(client), who
            before[who] = kept
    assert "a-renamed" in str(before["admin"]) and "a-renamed" in str(before["alice"])
    assert "a-wait" not in str(before["alice"]) and "a-wait" in str(before["admin"])


def test_a_members_kept_waits_of_a_round_follow_its_jobs() -> None:
    """``decisions.own_waits`` keeps a round's waits filtered by a member's jobs; a poll whose
    jobs differ (one finished long ago, another tenant's member) filters again."""
    from datetime import UTC, datetime

    from frontend.payloads.rounds import RoundView
    from scheduling.round_waits import pack_waits

    waits = [(1, "no GPU"), (2, "behind job 1"), (3, "no GPU"), (1, "not preempted")]
    meta = (99_001, datetime(2026, 1, 1, tzinfo=UTC), "sjf", 1.0, 0, len(waits), 0)
    r = RoundView.of(meta, [], pack_waits(waits))
    assert decisions.own_waits(r, frozenset({1, 3, 7}), 5) == [
        (1, "no GPU"),
        (3, "no GPU"),
        (1, "not preempted"),
    ]
    assert decisions.own_waits(r, frozenset({1, 3, 7}), 5) == [
        (1, "no GPU"),
        (3, "no GPU"),
        (1, "not preempted"),
    ]
    assert decisions.own_waits(r, frozenset({3, 7}), 5) == [(3, "no GPU")]  # job 1 no longer the member's
    assert decisions.own_waits(r, frozenset({2}), 6) == [(2, "behind job 1")]
    assert decisions.own_waits(r, frozenset(), 5) == []


def test_the_cluster_map_reads_a_round_without_its_waits_and_the_queue_then_reads_them(
    shared_cluster: dict[str, Job], admin_web: Client
) -> None:
    """``latest_rounds(waits=False)`` (the cluster map's) reads a new round without its packed
    ``waits`` column; the first caller that needs them reads the round whole and keeps that view,
    equal to one built from the row; a view without waits never replaces a whole one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from frontend.payloads.rounds import RoundView, latest_rounds
    from scheduling.round_waits import pack_waits

    jobs = shared_cluster
    starts = [d for d in record_round(jobs, []).decisions if d["action"] != "wait"]
    waits = [
        (jobs["c-wait"].pk, "needs 4 GPUs, 2 idle"),
        (jobs["a-wait"].pk, f"waits behind job {jobs['c-wait'].pk}"),
    ]
    row = Round.objects.create(
        policy="sjf-bsbf",
        duration_ms=3.0,
        n_started=2,
        n_waiting=2,
        n_preempted=0,
        decisions=starts,
        waits=pack_waits(waits),
        finished_at=timezone.now(),
    )

    def round_reads(queries: CaptureQueriesContext) -> list[str]:
        return [q["sql"] for q in queries.captured_queries if '"decisions"' in q["sql"]]

    with CaptureQueriesContext(connection) as queries:
        light = latest_rounds(1, waits=False)[0]
    assert light.pk == row.pk and not light.waits_read and light.waits == () and light.wait_order == ()
    assert light.slowdowns == {jobs["a-train"].pk: 1.3, jobs["c-train"].pk: 1.6}
    (read,) = round_reads(queries)
    assert '"waits"' not in read
    with CaptureQueriesContext(connection) as queries:
        whole = latest_rounds(1)[0]
    (read,) = round_reads(queries)
    assert '"waits"' in read
    meta = (row.pk, row.started_at, row.policy, row.duration_ms, 2, 2, 0)
    assert whole == RoundView.of(meta, starts, pack_waits(waits))
    assert whole.waits == tuple(waits) and whole.wait_order == (jobs["c-wait"].pk, jobs["a-wait"].pk)
    with CaptureQueriesContext(connection) as queries:
        again = latest_rounds(1, waits=False)[0]
    assert again is whole and round_reads(queries) == []  # the whole view, kept, serves it too
    # through the endpoints: the map first, then the queue shows the round's reasons
    assert get(admin_web, "cluster-map")
    assert f"waits behind job {jobs['c-wait'].pk}" in str(get(admin_web, "queue"))
