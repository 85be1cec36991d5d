"""Fair accounting and fairness metrics (scheduling.core.fairness) with hand-computed values, and
property tests (hypothesis) of the quota, release, accounting and starvation invariants
(TESTING.md 4, 5, 7, 8) on random snapshots."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.core.backfill import expected_free_times, shadow_time
from scheduling.core.charge import charge_rates, charge_split, running_charges
from scheduling.core.fairness import (
    GuaranteeMonitor,
    cap_violations,
    finish_time_fairness,
    guarantee_violations,
    jain_of_rho,
    tenant_rho,
    usage_vs_quota,
    wait_stats,
)
from scheduling.core.metrics import JobOutcome
from scheduling.core.policies import POLICY_NAMES, get_policy
from scheduling.core.quota import charged_usage, normalise, usage_by_tenant, wait_s
from scheduling.core.types import Cluster, Placement, RunningJob, SchedulerConfig, Snapshot, TenantQuota
from tests.unit.fakes import FakeProfile, job
from tests.unit.test_invariants import check_round, scenarios

TENANTS = ("a", "b", "c")


def outcome(
    job_id: int, tenant: str, submit: float, end: float, queue_s: float = 0.0, gpu_s: float = 0.0
) -> JobOutcome:
    return JobOutcome(job_id, tenant, 1, submit, submit + queue_s, end, queue_s, gpu_s)


# -- accounting ---------------------------------------------------------------------------------------


def test_charge_split_by_normalised_progress() -> None:
    # ξ_a = 1, ξ_b = 3: progress rates 1 and 1/3 → a pays 1/(1 + 1/3) = 0.75, b 0.25
    assert charge_split(1.0, 3.0) == (0.75, 0.25)
    assert charge_split(1.2, 1.2) == (0.5, 0.5)
    with pytest.raises(ValueError, match="positive"):
        charge_split(0.0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        charge_split(1.0, math.inf)


def test_charge_rates_hand_example() -> None:
    # GPU 0: job 1 alone → 1; GPU 1: jobs 1 and 2 with ξ_1 = 1.5, ξ_2 = 1.0 → job 1 pays 1/2.5 = 0.4,
    # job 2 0.6; GPU 2: jobs 2 and 3 with ξ 2.0 each → 0.5 each. Job 1: 1.4, job 2: 1.1, job 3: 0.5.
    xi = {(1, 2): 1.5, (2, 1): 1.0, (2, 3): 2.0, (3, 2): 2.0}
    rates = charge_rates([[1], [1, 2], [2, 3]], lambda a, b: xi[(a, b)])
    assert rates == pytest.approx({1: 1.4, 2: 1.1, 3: 0.5})
    with pytest.raises(ValueError, match="one or two"):
        charge_rates([[1, 2, 3]], lambda a, b: 1.0)


@given(
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=2, unique=True), max_size=12),
    st.lists(st.floats(0.5, 4.0), min_size=36, max_size=36),
)
def test_charged_gpu_time_adds_up_to_busy_gpu_time(occupancy: list[list[int]], xi: list[float]) -> None:
    # invariant 7: whatever the slowdowns (ξ of a next to b = xi[6a + b]), the charges of all jobs
    # sum to the busy GPUs, each > 0
    rates = charge_rates(occupancy, lambda a, b: xi[6 * a + b])
    assert sum(rates.values()) == pytest.approx(len(occupancy))
    assert all(r > 0 for r in rates.values())


# -- fairness metrics ---------------------------------------------------------------------------------


def test_finish_time_fairness_and_jain_of_rho() -> None:
    assert finish_time_fairness(300.0, 100.0) == 3.0
    with pytest.raises(ValueError, match="independent"):
        finish_time_fairness(1.0, 0.0)
    shared = [outcome(1, "a", 0, 100), outcome(2, "a", 0, 300), outcome(3, "b", 0, 400)]
    alone = [outcome(1, "a", 0, 200), outcome(3, "b", 0, 100), outcome(9, "z", 0, 5)]
    # a: mean 200 / mean 200 = 1; b: 400 / 100 = 4; z never ran shared → left out
    rho = tenant_rho(shared, alone)
    assert rho == {"a": 1.0, "b": 4.0}
    # shares 1/ρ = (1, 0.25): Jain = 1.25² / (2 × (1 + 0.0625)) = 1.5625 / 2.125
    assert jain_of_rho(rho) == pytest.approx(1.5625 / 2.125)


def test_wait_stats_hand_values() -> None:
    outs = [outcome(i, "a", 0, 1000, queue_s=float(q)) for i, q in enumerate([0, 10, 20, 30, 940])]
    stats = wait_stats(outs)
    # p99 (type 7): rank 0.99 × 4 = 3.96 → 30 + 0.96 × (940 − 30) = 903.6; mean 1000 / 5 = 200
    assert stats == pytest.approx({"max_wait_s": 940.0, "p99_wait_s": 903.6, "avg_wait_s": 200.0})
    assert all(math.isnan(v) for v in wait_stats([]).values())


def test_usage_vs_quota_hand_values() -> None:
    outs = [outcome(1, "a", 0, 10, gpu_s=7200.0), outcome(2, "c", 0, 10, gpu_s=3600.0)]
    table = usage_vs_quota(outs, {"a": 2, "b": TenantQuota(1, 0)}, window_s=3600.0)
    assert table["a"] == {"gpu_hours": 2.0, "quota_gpu_hours": 2.0, "usage_over_quota": 1.0}
    assert table["b"] == {"gpu_hours": 0.0, "quota_gpu_hours": 1.0, "usage_over_quota": 0.0}
    assert table["c"]["usage_over_quota"] == math.inf  # used 1 GPU-hour with no guarantee


def test_guarantee_and_cap_violations_hand_example() -> None:
    # 8 GPUs; a (guarantee 4) holds 8 = job 1 (own, started 0) + job 2 (borrowed, started 50);
    # b (guarantee 4) has had a 4-GPU job waiting since t=800; now = 1,000 → waited 200 s.
    cluster = Cluster.uniform(1, 8)
    run = (
        RunningJob(job(1, gpus=4, tenant="a"), Placement(1, (0, 1, 2, 3), 32, 0.0)),
        RunningJob(job(2, gpus=4, tenant="a"), Placement(2, (4, 5, 6, 7), 32, 50.0)),
    )
    waiting = job(3, gpus=4, tenant="b", submit=800.0)
    s = Snapshot(1000.0, cluster, (waiting,), run)
    quotas = {"a": 4, "b": 4}
    assert guarantee_violations(s, quotas, grace_s=100.0) == [3]
    assert guarantee_violations(s, quotas, grace_s=300.0) == []
    assert guarantee_violations(s, {}, grace_s=0.0) == []
    assert cap_violations(s, {"a": TenantQuota(4, 2), "b": 4}) == {"a": 2}
    assert cap_violations(s, quotas) == {}


# -- property tests of the invariants on random snapshots ----------------------------------------------


@st.composite
def quota_scenarios(draw: st.DrawFn) -> tuple[Snapshot, FakeProfile]:
    """A valid random snapshot (tests.unit.test_invariants) with jobs spread over three tenants,
    random quotas (some with borrow limits), reclaim mode and starvation settings."""
    snapshot, profile = draw(scenarios())

    def spread(j):  # noqa: ANN001, ANN202 - a Job
        return dataclasses.replace(j, tenant=draw(st.sampled_from(TENANTS)))

    pending = tuple(spread(j) for j in snapshot.pending)
    running = tuple(RunningJob(spread(rj.job), rj.placement) for rj in snapshot.running)
    quotas = {
        t: TenantQuota(draw(st.integers(0, 6)), draw(st.sampled_from([None, 0, 1, 4])))
        for t in TENANTS
        if draw(st.booleans())
    }
    config = dataclasses.replace(
        snapshot.config,
        reclaim=draw(st.sampled_from(["preempt", "bound", "both"])),
        borrow_bound_s=draw(st.sampled_from([10.0, 3600.0])),
        starvation_bound_s=draw(st.sampled_from([20.0, 1e9])),
    )
    return dataclasses.replace(
        snapshot, pending=pending, running=running, config=config, tenant_quotas=quotas
    ), profile


def usage_after(snapshot: Snapshot, d) -> dict[str, int]:  # noqa: ANN001 - RoundDecisions
    gone = {p.job_id for p in d.preemptions}
    pending = {j.id: j for j in snapshot.pending}
    usage = usage_by_tenant(rj for rj in snapshot.running if rj.job.id not in gone)
    for s in d.starts:
        t = pending[s.job_id].tenant
        usage[t] = usage.get(t, 0) + pending[s.job_id].gpus
    return usage


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=quota_scenarios())
def test_quota_invariant_every_policy(name: str, case: tuple[Snapshot, FakeProfile]) -> None:
    """Invariant 4 (and 1–3 still hold with quotas): no start takes a tenant above its cap; a
    policy that cannot reclaim by preemption lets a job borrow only within the borrow bound."""
    snapshot, profile = case
    d = get_policy(name).decide(snapshot, profile)
    check_round(name, snapshot, profile, d)
    quotas = normalise(snapshot.tenant_quotas)
    before = usage_by_tenant(snapshot.running)
    after = usage_after(snapshot, d)
    pending = {j.id: j for j in snapshot.pending}
    started_by: dict[str, int] = {}
    for s in d.starts:
        t = pending[s.job_id].tenant
        started_by[t] = started_by.get(t, 0) + 1
    for tenant, used in after.items():
        cap = quotas.get(tenant, TenantQuota(0)).cap if quotas else math.inf
        if started_by.get(tenant):
            assert used <= cap, f"{name}: tenant {tenant} holds {used} GPUs, cap {cap}"
        assert used <= max(cap, before.get(tenant, 0))
    if not quotas or (name == "sjf-bsbf-fair" and snapshot.config.reclaim == "preempt"):
        return
    # walk the starts in admission order from a lower bound of the usage the gate saw (running jobs
    # minus every preemption): a start that borrows even then must be within the borrow bound, or
    # have waited past the starvation bound
    gone = {p.job_id for p in d.preemptions}
    usage = usage_by_tenant(rj for rj in snapshot.running if rj.job.id not in gone)
    for s in d.starts:
        j = pending[s.job_id]
        usage[j.tenant] = usage.get(j.tenant, 0) + j.gpus
        if usage[j.tenant] > quotas.get(j.tenant, TenantQuota(0)).guaranteed_gpus:
            assert (
                j.remaining_time_s <= snapshot.config.borrow_bound_s
                or wait_s(j, snapshot.now) >= snapshot.config.starvation_bound_s
            )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=quota_scenarios())
def test_release_invariant_fair_policy_preempts_only_borrowed_work(
    case: tuple[Snapshot, FakeProfile],
) -> None:
    """Invariant 5 for reclaim: every preempted job was borrowed work — its tenant stays at or
    above its guarantee after all of the round's preemptions, in normalised GPUs — holds no GPU
    afterwards (not restarted in the same round), and was preempted for a waiting job: of another
    tenant within its guarantee, of a higher priority, or of another tenant on whose GPUs it is
    co-located; nothing is preempted without quotas or in reclaim mode "bound"."""
    snapshot, profile = case
    d = get_policy("sjf-bsbf-fair").decide(snapshot, profile)
    preempted = {p.job_id for p in d.preemptions}
    if not snapshot.tenant_quotas or snapshot.config.reclaim == "bound":
        assert not preempted
    assert not preempted & {s.job_id for s in d.starts}
    quotas = normalise(snapshot.tenant_quotas)
    charges = running_charges(snapshot.running, profile)
    before = charged_usage(snapshot.running, charges)
    after = dict(before)
    for rj in snapshot.running:
        if rj.job.id in preempted:
            after[rj.job.tenant] -= charges[rj.job.id]
    for rj in snapshot.running:
        if rj.job.id in preempted:
            guaranteed = quotas.get(rj.job.tenant, TenantQuota(0)).guaranteed_gpus
            assert after[rj.job.tenant] >= guaranteed - 1e-9
            beside = {
                other.job.tenant
                for other in snapshot.running
                if set(other.placement.gpu_ids) & set(rj.placement.gpu_ids) and other.job.id != rj.job.id
            }
            assert any(
                (
                    j.tenant != rj.job.tenant
                    and before.get(j.tenant, 0) + j.gpus
                    <= quotas.get(j.tenant, TenantQuota(0)).guaranteed_gpus + 1e-9
                )
                or j.priority > rj.job.priority
                or (j.tenant != rj.job.tenant and j.tenant in beside)
                for j in snapshot.pending
            )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenarios(), bound=st.sampled_from([10.0, 60.0, 100.0]))
def test_starvation_invariant_reservation(case: tuple[Snapshot, FakeProfile], bound: float) -> None:
    """Invariant 8 (one round, no quotas): the oldest starving job (waited ≥ the bound) that could
    ever start goes first; if it does not start, every job started is backfilled: alone on idle
    GPUs, and those expected to run past the reservation's shadow time use no more than its spare
    GPUs — so they never delay it (EASY backfilling, Lifka 1995)."""
    snapshot, profile = case
    config = dataclasses.replace(snapshot.config, starvation_bound_s=bound)
    snapshot = dataclasses.replace(snapshot, config=config)
    d = get_policy("sjf-bsbf-fair").decide(snapshot, profile)
    assert not d.preemptions  # no quotas: never preempts
    healthy = snapshot.cluster.healthy_gpus
    largest = max((g.memory_mb for g in snapshot.cluster.gpus if g.healthy), default=0)
    min_sub = snapshot.config.min_sub_batch

    def could_ever_start(j) -> bool:  # noqa: ANN001 - a Job
        return 1 <= j.gpus <= healthy and any(
            profile.memory_mb(j, b) <= largest for b in profile.sub_batches(j, min_sub)
        )

    now = snapshot.now
    starving = sorted(
        (j for j in snapshot.pending if wait_s(j, now) >= bound and could_ever_start(j)),
        key=lambda j: (j.waiting_since, j.submit_time, j.id),
    )
    if not starving or starving[0].id in {s.job_id for s in d.starts}:
        return
    head = starving[0]
    pending = {j.id: j for j in snapshot.pending}
    busy = {g for rj in snapshot.running for g in rj.placement.gpu_ids}
    idle = sum(1 for g in snapshot.cluster.gpus if g.healthy and g.id not in busy)
    shadow, spare = shadow_time(expected_free_times(snapshot, profile), idle, head.gpus, now)
    late = 0
    for s in d.starts:
        j = pending[s.job_id]
        assert not s.shares and not set(s.gpu_ids) & busy  # backfill: alone, on idle GPUs
        if now + j.remaining_time_s > shadow:
            late += j.gpus
    assert late <= spare  # jobs still running at the shadow time use only GPUs it will not need


def test_generous_quotas_change_no_decision_of_the_paper_policies() -> None:
    # every tenant guaranteed the whole cluster: nobody ever borrows, so the gate never refuses
    cluster = Cluster.uniform(1, 4)
    jobs = [job(i, gpus=1 + i % 3, iterations=50 * i, tenant=TENANTS[i % 3]) for i in range(1, 7)]
    for name in POLICY_NAMES:
        plain = get_policy(name).decide(Snapshot(0.0, cluster, tuple(jobs), ()), FakeProfile())
        quotas = dict.fromkeys(TENANTS, 4)
        generous = get_policy(name).decide(
            Snapshot(0.0, cluster, tuple(jobs), (), SchedulerConfig(), quotas), FakeProfile()
        )
        assert plain.starts == generous.starts and plain.preemptions == generous.preemptions


def test_guarantee_monitor_counts_from_when_the_owner_became_entitled() -> None:
    # the snapshot of test_guarantee_and_cap_violations_hand_example at three instants: b's job is
    # entitled-and-blocked from t=1,000 (the first look); grace 120 s → not yet at 1,100 (100 s),
    # a violation at 1,200 (200 s > 120 s) although it had waited since 800 all along
    cluster = Cluster.uniform(1, 8)
    run = (
        RunningJob(job(1, gpus=4, tenant="a"), Placement(1, (0, 1, 2, 3), 32, 0.0)),
        RunningJob(job(2, gpus=4, tenant="a"), Placement(2, (4, 5, 6, 7), 32, 50.0)),
    )
    waiting = (job(3, gpus=4, tenant="b", submit=800.0),)
    monitor = GuaranteeMonitor({"a": 4, "b": 4}, grace_s=120.0)
    monitor.observe(Snapshot(1000.0, cluster, waiting, run))
    monitor.observe(Snapshot(1100.0, cluster, waiting, run))
    assert monitor.violated == set()
    monitor.observe(Snapshot(1100.0, cluster, waiting, run[:1]))  # job 2 gone: 4 idle, not blocked
    monitor.observe(Snapshot(1200.0, cluster, waiting, run))  # blocked again: a new streak from 1,200
    assert monitor.violated == set()
    monitor.observe(Snapshot(1321.0, cluster, waiting, run))
    assert monitor.violated == {3} and monitor.longest_s == 121.0
