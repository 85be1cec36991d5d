"""GPU types in the core (scheduling/core/gpu_types.py, placement.py, rounds.py).

Smallest inputs, every expectation computed by hand in the comments. The cluster: node-00 holds
GPUs 0–1 of type a100 (80,000 MB), node-01 GPUs 2–3 of type t4 (16,000 MB). FakeProfile's
``memory[model] = (static, per_sample)``: ``mem(b) = static + per_sample · b`` MB per GPU; jobs
have batch 32 (sub-batches 32, 16, 8, 4, 2, 1).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.gpu_types import TypeBook, pick_smallest_sufficient, tiers_upward
from scheduling.core.policies import POLICY_NAMES, get_policy
from scheduling.core.round_state import RoundState
from scheduling.core.types import (
    GPU,
    Cluster,
    Job,
    Placement,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
)
from tests.unit.fakes import FakeProfile, job

# "small": 1,000 MB; "grow": 10,000 + 1,000·b (mem(32) = 42,000, mem(4) = 14,000); "big": 60,000
PROFILE = FakeProfile(memory={"small": (1_000, 0), "grow": (10_000, 1_000), "big": (60_000, 0)})


def mixed(a100: int = 2, t4: int = 2) -> Cluster:
    gpus = [GPU(i, "node-00", i, 80_000, "a100") for i in range(a100)]
    gpus += [GPU(a100 + i, "node-01", i, 16_000, "t4") for i in range(t4)]
    return Cluster(tuple(gpus))


def typed(j: Job, *types: str) -> Job:
    return replace(j, gpu_types=tuple(types))


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start))


def snap(pending: list[Job], run: list[RunningJob] | None = None, **kw: object) -> Snapshot:
    return Snapshot(1000.0, kw.pop("cluster", mixed()), tuple(pending), tuple(run or ()), **kw)  # type: ignore[arg-type]


def starts(d) -> list[tuple[int, tuple[int, ...], int]]:
    return [(s.job_id, s.gpu_ids, s.sub_batch) for s in d.starts]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_small_job_of_any_type_takes_the_small_gpu(name: str) -> None:
    # "small" fits either type at sub-batch 32 (1,000 MB); floor 1,000 → tiers (16,000, t4) first,
    # 2 idle t4 ≥ 1 → node-01, lowest id 2. The a100s stay idle.
    d = get_policy(name).decide(snap([job(1, model="small")]), PROFILE)
    assert starts(d) == [(1, (2,), 32)]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_job_that_needs_the_large_memory_gets_it(name: str) -> None:
    # "grow": the largest idle GPU has 80,000 ≥ mem(32) = 42,000 → sub-batch 32, floor 42,000 MB:
    # only the a100 tier qualifies → GPU 0 (a t4 would hold it only at sub-batch 4).
    d = get_policy(name).decide(snap([job(1, model="grow")]), PROFILE)
    assert starts(d) == [(1, (0,), 32)]


@pytest.mark.parametrize("name", [n for n in POLICY_NAMES if n not in ("srtf", "tiresias")])
def test_a_job_asking_for_a100_waits_for_it_while_t4_is_idle(name: str) -> None:
    # both a100s busy; the small job accepts a100 only → waits although GPUs 2, 3 (t4) are idle
    # (the preemptive baselines would preempt an a100 job for it: the test below)
    busy = [running(job(10 + i, model="big", iterations=10_000, tenant="o"), (i,)) for i in range(2)]
    d = get_policy(name).decide(snap([typed(job(1, model="small"), "a100")], busy), PROFILE)
    assert starts(d) == []
    assert [w.job_id for w in d.waits] == [1] and "a100" in d.waits[0].reason


@pytest.mark.parametrize("name", ["fifo", "sjf-bsbf", "sjf-bsbf-fair"])
def test_a_job_asking_for_a100_gets_a100(name: str) -> None:
    d = get_policy(name).decide(snap([typed(job(1, model="small"), "a100")]), PROFILE)
    assert starts(d) == [(1, (0,), 32)]


def test_an_unknown_type_never_fits_and_blocks_no_one() -> None:
    # FIFO is strict, but a job that can never start does not block the next one
    d = get_policy("fifo").decide(snap([typed(job(1), "h100"), job(2, submit=1.0)]), PROFILE)
    assert starts(d) == [(2, (2,), 32)]
    assert "h100" in d.waits[0].reason and "no healthy GPU" in d.waits[0].reason


def test_memory_beyond_every_accepted_type_never_fits() -> None:
    # "big" needs 60,000 MB at every sub-batch; t4 has 16,000 → never fits when it accepts t4 only
    d = get_policy("sjf").decide(snap([typed(job(1, model="big"), "t4")]), PROFILE)
    assert starts(d) == [] and "16000 MB" in d.waits[0].reason


@pytest.mark.parametrize("name", ["sjf", "sjf-bsbf-fair"])
def test_per_type_quota_caps_the_type_not_the_total(name: str) -> None:
    # tenant a: a100 quota 1 guaranteed, borrow 0 → cap 1 a100; it holds GPU 0 (a100). Job 1 needs
    # a100 ("big") → refused; job 2 ("small", any type) → t4 GPU 2; any-quota 4 keeps the total ok.
    held = running(job(10, model="small", iterations=10_000, tenant="a"), (0,))
    s = snap(
        [job(1, model="big", tenant="a"), job(2, model="small", tenant="a", submit=1.0)],
        [held],
        tenant_quotas={"a": TenantQuota(4, 0)},
        type_quotas={"a": {"a100": TenantQuota(1, 0)}},
    )
    d = get_policy(name).decide(s, PROFILE)
    assert starts(d) == [(2, (2,), 32)]
    reason = {w.job_id: w.reason for w in d.waits}[1]
    assert "per-type quota" in reason and "a100 1" in reason, reason


def test_per_type_quota_sends_an_any_type_job_to_the_other_type() -> None:
    # tenant a may hold 0 t4 (cap 0): its small job, which would go to t4 first, takes a100 GPU 0
    s = snap(
        [job(1, model="small", tenant="a")],
        tenant_quotas={"a": 4},
        type_quotas={"a": {"t4": TenantQuota(0, 0)}},
    )
    assert starts(get_policy("sjf-bsbf").decide(s, PROFILE)) == [(1, (0,), 32)]


def test_the_starving_head_reserves_its_type_only() -> None:
    # a100s held by two long "big" jobs (no room to share: 80,000 − 60,000 − 1,024 < 60,000).
    # Job 1 ("big", a100 only) has waited 900 s ≥ bound 100 s → head, blocked → reserves a100.
    # Job 2 ("small", any, P = 10^6 s: no backfill by time) still starts on t4 GPU 2 at once;
    # job 3 ("small", a100 only) must not slip onto the reserved type (none idle anyway → waits).
    config = SchedulerConfig(starvation_bound_s=100.0)
    busy = [running(job(10 + i, model="big", iterations=10_000, tenant="o"), (i,)) for i in range(2)]
    head = typed(job(1, model="big", submit=100.0, tenant="a"), "a100")
    later = job(2, model="small", iterations=1_000_000, submit=900.0, tenant="b")
    pinned = typed(job(3, model="small", iterations=1_000_000, submit=950.0, tenant="b"), "a100")
    d = get_policy("sjf-bsbf-fair").decide(snap([head, later, pinned], busy, config=config), PROFILE)
    assert starts(d) == [(2, (2,), 32)]
    waits = {w.job_id: w.reason for w in d.waits}
    assert set(waits) == {1, 3}


def test_one_type_is_single_and_leaves_placement_alone() -> None:
    state = RoundState(Snapshot(0.0, Cluster.uniform(2, 4), (), ()))
    assert state.types.single and state.types.types == {"v100": 49_140}
    mixed_state = RoundState(Snapshot(0.0, mixed(), (), ()))
    assert not mixed_state.types.single
    assert TypeBook(Snapshot(0.0, mixed(), (), ())).types == {"a100": 80_000, "t4": 16_000}


def test_tiers_and_smallest_sufficient_pick() -> None:
    c = mixed(a100=2, t4=1)
    gpus = c.gpus
    assert tiers_upward(gpus, [0, 1, 2], 0) == [(16_000, "t4"), (80_000, "a100")]
    assert tiers_upward(gpus, [0, 1, 2], 20_000) == [(80_000, "a100")]
    # a gang of 2 with floor 1,000: the t4 tier has 1 idle < 2 → tiers ≤ a100 (3 GPUs); the picker
    # is given the predicate; here it picks the lowest ids that pass
    chosen = pick_smallest_sufficient(
        gpus, [0, 1, 2], 2, 1_000, lambda ok: tuple(g.id for g in gpus if ok(g))[:2]
    )
    assert chosen == (0, 1)
    assert pick_smallest_sufficient(gpus, [2], 2, 1_000, lambda ok: (2,)) is None


def test_sim_a_job_needing_the_large_type_starts_within_the_bound() -> None:
    # 2 a100 + 2 t4; a 1-GPU "small" job (600 s) every 150 s for 2 h: 4 GPUs of demand on 4 GPUs.
    # Job 1000 (2 GPUs, a100 only, 1,800 s) arrives at t = 300. Under sjf-bsbf its P_j is always
    # the longest: it waits for the stream to end. Under sjf-bsbf-fair (bound 1,800 s) it becomes
    # the head at t = 2,100 at the latest, reserves the a100s only, and starts once the small jobs
    # on them end: wait ≤ bound + 600 s (their run) + 60 s (one round interval) = 2,460 s.
    from scheduling.sim.engine import SimConfig, simulate

    small = [job(i, model="small", iterations=600, submit=150.0 * i, tenant="s") for i in range(48)]
    big = typed(job(1000, gpus=2, model="small", iterations=1_800, submit=300.0, tenant="b"), "a100")
    config = SimConfig(scheduler=SchedulerConfig(starvation_bound_s=1_800.0))
    waits = {}
    for name in ("sjf-bsbf", "sjf-bsbf-fair"):
        result = simulate([*small, big], mixed(), get_policy(name), PROFILE, config)
        waits[name] = {o.job_id: o.queue_s for o in result.outcomes}[1000]
    assert waits["sjf-bsbf-fair"] <= 1_800.0 + 600.0 + 60.0
    assert waits["sjf-bsbf"] > 1_800.0 + 600.0 + 60.0


def test_a_head_over_its_per_type_caps_reserves_nothing() -> None:
    # Job 1 (2 GPUs, a100 only) has waited past the bound, but tenant a may hold no a100 (cap
    # 0 + 0): it could never start now, so it must hold no reservation. GPU 1 is busy; idle: 0
    # (a100), 2, 3 (t4). Jobs 2 and 3 (tenant b, 10^6 s: never "ending before the shadow time")
    # both start: 2 on t4 GPU 2, 3 (a100 only) on GPU 0. Had job 1 reserved, the shadow time
    # would leave 3 idle − 2 needed = 1 spare GPU: job 2 would backfill on it and job 3 wait.
    config = SchedulerConfig(starvation_bound_s=100.0)
    head = typed(job(1, gpus=2, model="small", submit=0.0, tenant="a"), "a100")
    later = job(2, model="small", iterations=1_000_000, submit=900.0, tenant="b")
    pinned = typed(job(3, model="small", iterations=1_000_000, submit=950.0, tenant="b"), "a100")
    busy = [running(job(10, model="big", iterations=10_000, tenant="o"), (1,))]
    s = snap([head, later, pinned], busy, config=config, type_quotas={"a": {"a100": TenantQuota(0, 0)}})
    d = get_policy("sjf-bsbf-fair").decide(s, PROFILE)
    assert sorted(starts(d)) == [(2, (2,), 32), (3, (0,), 32)]
    assert "per-type quota" in {w.job_id: w.reason for w in d.waits}[1]


@pytest.mark.parametrize("name", ["srtf", "tiresias"])
def test_preemptive_baselines_free_gpus_of_the_type_the_job_needs(name: str) -> None:
    # Every GPU busy: a100s by jobs 10, 11; t4s by jobs 12, 13 (1 GPU each, tenant o, 5,000 GPU-s
    # attained: past Tiresias' 3,200 GPU-s threshold, in its lower queue). Job 1 (1 GPU, a100
    # only) ranks first (SRTF: P = 100 s vs ≥ 10^4 s; Tiresias: the first queue). Counted over all
    # types, the last-ranked running job — a t4 job — would be preempted and job 1 could not start
    # on its t4. Counted per type, the later-ranked a100 job (11) goes and job 1 takes GPU 1.
    def long(i: int, remaining: int, gpu: int) -> RunningJob:
        j = job(i, model="small", iterations=remaining, submit=0.0, attained=5_000.0, tenant="o")
        return running(j, (gpu,))

    busy = [long(10, 10_000, 0), long(11, 10_001, 1), long(12, 20_000, 2), long(13, 20_001, 3)]
    pinned = typed(job(1, model="small", submit=500.0, tenant="a"), "a100")
    d = get_policy(name).decide(snap([pinned], busy), PROFILE)
    assert [p.job_id for p in d.preemptions] == [11]
    assert starts(d) == [(1, (1,), 32)]


def test_type_capacity_is_exact_for_mixed_requests() -> None:
    # 2 a100 + 2 t4. X (2 GPUs, any type) then Y (2 GPUs, a100 only): feasible (X on the t4s),
    # whatever type X "would" take; then Z (1 GPU, any): 5 > 4 GPUs → refused. A running job on a
    # t4 may then not be kept (X needs both t4s once Y has the a100s).
    from scheduling.core.gpu_types import TypeCapacity

    c = mixed()
    book = TypeBook(Snapshot(0.0, c, (), ()))
    cap = TypeCapacity(c.gpus, book)
    assert cap.admit(job(1, gpus=2), {"a100", "t4"})
    assert cap.admit(job(2, gpus=2), {"a100"})
    assert not cap.admit(job(3), {"a100", "t4"})
    assert not cap.keep([2])
    fresh = TypeCapacity(c.gpus, book)
    assert (
        fresh.keep([2]) and fresh.admit(job(4, gpus=2), {"a100"}) and not fresh.admit(job(5, gpus=2), {"t4"})
    )
