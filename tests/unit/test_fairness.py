"""Fair accounting and fairness metrics (scheduling.core.fairness) with hand-computed values, and
property tests (hypothesis) of the quota, release, accounting and starvation invariants
(TESTING.md 4, 5, 7, 8) on random snapshots."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
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
from scheduling.core.quota import charged_usage, normalise, wait_s
from scheduling.core.types import (
    GPU,
    Cluster,
    Placement,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
)
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


def small_job(job_id: int, tenant: str, model: str, gpus: int = 1):  # noqa: ANN201 - a Job
    """A 1-iteration job of batch 8 (the shape of the cases below)."""
    return job(job_id, gpus=gpus, model=model, batch=8, iterations=1, iter_time_s=0.1, tenant=tenant)


def found_case(
    nodes: int,
    per_node: int,
    healthy: int,
    pending: tuple,
    running: tuple,
    quotas: dict,
    big_model_a: bool,
) -> tuple[Snapshot, FakeProfile]:
    """A snapshot of the shape hypothesis draws: ``nodes`` × ``per_node`` GPUs of 16,000 MB (the
    nodes from index ``healthy`` on healthy), ``running`` as (job id, tenant, model, gang, GPU
    ids), slowdowns 1 for every pair (so a shared GPU splits 0.5/0.5), model a of 20,000 MB (fits
    no GPU) when ``big_model_a``."""
    gpus = tuple(
        GPU(n * per_node + i, f"node-{n:02d}", i, 16000, healthy=n >= healthy)
        for n in range(nodes)
        for i in range(per_node)
    )
    run = tuple(RunningJob(small_job(j, t, m, g), Placement(j, ids, 8, 0.0)) for j, t, m, g, ids in running)
    config = SchedulerConfig(memory_reserve_mb=0, starvation_bound_s=20.0, borrow_bound_s=10.0)
    snapshot = Snapshot(100.0, Cluster(gpus), pending, run, config, tenant_quotas=quotas)
    models = ("a", "b", "c")
    profile = FakeProfile(
        memory={"a": (20000 if big_model_a else 2000, 0), "b": (2000, 0), "c": (2000, 0)},
        slowdowns={(m, n): (1.0, 1.0) for m in models for n in models},
        accum_overhead=0.0,
    )
    return snapshot, profile


def co_located_gang_case() -> tuple[Snapshot, FakeProfile]:
    """A case hypothesis found (kept as an explicit example): on 2 × 4 GPUs (node-00 unhealthy),
    tenant c (guarantee 6, borrow limit 1: cap 7) runs jobs 2 and 3 together on GPU 0, job 3 also
    on GPU 1 beside tenant a's job 4, and job 5 on GPU 2; c's 4-GPU job 9 waits (a's jobs 6–8 can
    never fit). Reclaim preempts job 4 (borrowed, on c's GPUs); c's use by the normalised split is
    then GPU 0 (0.5 + 0.5) + GPU 1 (1, job 3 alone) + GPU 2 (1) = 3, so job 9 starts: 3 + 4 = 7,
    its cap. Summing gangs would count GPU 0 twice (1 + 2 + 1 + 4 = 8) — not the rule of
    ``sjf-bsbf-fair`` (docs/FAIRNESS.md §1, *usage*)."""
    pending = tuple(small_job(j, "a", "a") for j in (6, 7, 8)) + (small_job(9, "c", "b", gpus=4),)
    running = (
        (2, "c", "b", 1, (0,)),
        (3, "c", "b", 2, (0, 1)),
        (4, "a", "b", 1, (1,)),
        (5, "c", "b", 1, (2,)),
    )
    return found_case(2, 4, 1, pending, running, {"c": TenantQuota(6, 1)}, big_model_a=True)


def reclaimed_partner_case() -> tuple[Snapshot, FakeProfile]:
    """A second case hypothesis found: no GPU healthy (nothing starts); tenant a (cap 0) runs job 2
    on GPU 0 beside c's job 1 and jobs 4, 5 together on GPU 1 — 0.5 + 0.5 + 0.5 = 1.5 by the split,
    over its cap; c's job 1 also sits on b's GPU 2 (beside job 3) while b (guarantee 1) waits, so
    reclaim preempts it. a's job 2 is then alone on GPU 0: a's use rises to 2 with no start of its
    own — the split of GPUs it already held, not an admission (docs/FAIRNESS.md §1, over quota)."""
    pending = (small_job(6, "a", "a"), small_job(7, "b", "a"))
    running = (
        (1, "c", "a", 2, (0, 2)),
        (2, "a", "a", 1, (0,)),
        (3, "b", "a", 1, (2,)),
        (4, "a", "a", 1, (1,)),
        (5, "a", "a", 1, (1,)),
    )
    quotas = {"a": TenantQuota(0, 0), "b": TenantQuota(1, None)}
    return found_case(2, 3, 2, pending, running, quotas, big_model_a=False)


def partner_left_case() -> tuple[Snapshot, FakeProfile]:
    """A third case hypothesis found: 3 GPUs, none healthy; tenant a (guarantee 2) runs job 4 on
    GPUs 1 and 2, beside b's job 1 (GPUs 0, 1) and c's job 2 (GPU 2); c (guarantee 1) also runs
    job 3 on GPU 0 beside job 1. By the split a holds 1, c 1 (0.5 + 0.5). Reclaim preempts the
    borrowed jobs on a's GPUs, 1 and 2: job 3 is then alone on GPU 0, so c holds 1 — still its
    guarantee — though job 2's charge before the round (0.5) taken from c's 1 would say 0.5."""
    pending = tuple(small_job(j, "a", "a") for j in (5, 6, 7, 8))
    running = (
        (1, "b", "a", 2, (0, 1)),
        (2, "c", "a", 1, (2,)),
        (3, "c", "a", 1, (0,)),
        (4, "a", "a", 2, (1, 2)),
    )
    quotas = {"a": TenantQuota(2, None), "c": TenantQuota(1, None)}
    return found_case(1, 3, 1, pending, running, quotas, big_model_a=False)


def quota_use(
    name: str, running: Sequence[RunningJob], profile: FakeProfile, *, split: bool
) -> tuple[dict[str, float], dict[int, float] | None]:
    """Tenant → quota use of ``running`` as policy ``name``'s gate counts it, and the charges
    (job id → normalised GPUs) it reads: the normalised split under ``sjf-bsbf-fair`` with
    ``split_charge`` on (docs/FAIRNESS.md §1), else the sum of gangs (``None``)."""
    charges = running_charges(running, profile) if name == "sjf-bsbf-fair" and split else None
    return charged_usage(running, charges), charges


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=quota_scenarios())
@example(case=co_located_gang_case())
@example(case=reclaimed_partner_case())
def test_quota_invariant_every_policy(name: str, case: tuple[Snapshot, FakeProfile]) -> None:
    """Invariant 4 (and 1–3 still hold with quotas): no start takes a tenant above its cap; a
    policy that cannot reclaim by preemption lets a job borrow only within the borrow bound. Use is
    counted as the policy's gate counts it (:func:`quota_use`): the normalised split under
    ``sjf-bsbf-fair``, so a GPU two of a tenant's jobs share counts once."""
    snapshot, profile = case
    d = get_policy(name).decide(snapshot, profile)
    check_round(name, snapshot, profile, d)
    quotas = normalise(snapshot.tenant_quotas)
    split = bool(quotas) and snapshot.config.split_charge
    pending = {j.id: j for j in snapshot.pending}
    gone = {p.job_id for p in d.preemptions}
    kept = tuple(rj for rj in snapshot.running if rj.job.id not in gone)
    started = tuple(
        RunningJob(pending[s.job_id], Placement(s.job_id, s.gpu_ids, s.sub_batch, snapshot.now))
        for s in d.starts
    )
    # a tenant without a start holds no more than after the round's preemptions: under the split
    # a preempted partner's share of a GPU goes back to the job left on it (reclaimed_partner_case)
    before = quota_use(name, kept, profile, split=split)[0]
    after, charges = quota_use(name, (*kept, *started), profile, split=split)
    started_by = {rj.job.tenant for rj in started}
    for tenant, used in after.items():
        cap = quotas.get(tenant, TenantQuota(0)).cap if quotas else math.inf
        if tenant in started_by:
            assert used <= cap + 1e-9, f"{name}: tenant {tenant} holds {used} GPUs, cap {cap}"
        assert used <= max(cap, before.get(tenant, 0)) + 1e-9
    if not quotas or (name == "sjf-bsbf-fair" and snapshot.config.reclaim == "preempt"):
        return
    # walk the starts in admission order from a lower bound of the usage the gate saw (running jobs
    # minus every preemption, each charged as after the round: a later co-location only lowers a
    # job's split): a start that borrows even then must be within the borrow bound, or have waited
    # past the starvation bound
    usage = charged_usage(kept, charges)
    for rj in started:
        j = rj.job
        usage[j.tenant] = usage.get(j.tenant, 0) + (j.gpus if charges is None else charges[j.id])
        if usage[j.tenant] > quotas.get(j.tenant, TenantQuota(0)).guaranteed_gpus + 1e-9:
            assert (
                j.remaining_time_s <= snapshot.config.borrow_bound_s
                or wait_s(j, snapshot.now) >= snapshot.config.starvation_bound_s
            )


def test_a_gpu_two_jobs_of_a_tenant_share_counts_once_against_its_cap() -> None:
    # co_located_gang_case: reclaim takes back a's job 4 from c's GPU 1; c's split is then
    # 0.5 + 0.5 (GPU 0) + 1 (GPU 1) + 1 (GPU 2) = 3, and 3 + 4 = 7 = its cap → job 9 starts
    snapshot, profile = co_located_gang_case()
    d = get_policy("sjf-bsbf-fair").decide(snapshot, profile)
    assert [p.job_id for p in d.preemptions] == [4]
    assert [(s.job_id, s.gpu_ids) for s in d.starts] == [(9, (4, 5, 6, 7))]
    # split_charge off: whole gangs, 1 + 2 + 1 + 4 = 8 > 7 → refused by the cap, nothing reclaimed
    whole = dataclasses.replace(snapshot, config=dataclasses.replace(snapshot.config, split_charge=False))
    d = get_policy("sjf-bsbf-fair").decide(whole, profile)
    assert not d.starts and not d.preemptions
    assert {w.job_id: w.reason for w in d.waits}[9] == (
        "tenant c would hold 8 GPUs, above its quota cap of 7 (6 guaranteed + 1 borrowable)"
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=quota_scenarios())
@example(case=partner_left_case())
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
    split = snapshot.config.split_charge
    before, _ = quota_use("sjf-bsbf-fair", snapshot.running, profile, split=split)
    # after the preemptions, the survivors' use counted anew: a job whose partner left holds its
    # GPU alone and is charged all of it (partner_left_case)
    survivors = [rj for rj in snapshot.running if rj.job.id not in preempted]
    after, _ = quota_use("sjf-bsbf-fair", survivors, profile, split=split)
    for rj in snapshot.running:
        if rj.job.id in preempted:
            guaranteed = quotas.get(rj.job.tenant, TenantQuota(0)).guaranteed_gpus
            assert after.get(rj.job.tenant, 0.0) >= guaranteed - 1e-9
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
