"""Each policy on tiny snapshots whose decisions are computed by hand (MODEL.md §2–4)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from scheduling.core.policies import POLICY_NAMES, UnknownPolicyError, get_policy
from scheduling.core.policies.tiresias import QUEUE_THRESHOLD_GPU_S, STARVATION_FACTOR
from scheduling.core.skip import SkipRule
from scheduling.core.types import (
    GPU,
    Cluster,
    Job,
    Placement,
    RoundDecisions,
    RunningJob,
    SchedulerConfig,
    Snapshot,
)
from tests.unit.fakes import FakeProfile, job

EXCLUSIVE = ("fifo", "sjf", "srtf", "tiresias")
SHARING = ("sjf-ffs", "sjf-bsbf")
PLAIN = FakeProfile(memory={"m": (1000, 0)})  # 1,000 MB at every sub-batch; ξ 1.3 by default


def running(j: Job, gpu_ids: tuple[int, ...], sub_batch: int | None = None) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, sub_batch or j.batch_size, 0.0))


def snap(
    cluster: Cluster,
    pending: list[Job],
    run: list[RunningJob] | None = None,
    now: float = 1000.0,
    **config: int,
) -> Snapshot:
    return Snapshot(now, cluster, tuple(pending), tuple(run or ()), SchedulerConfig(**config))


def decide(name: str, snapshot: Snapshot, profile: FakeProfile = PLAIN) -> RoundDecisions:
    return get_policy(name).decide(snapshot, profile)


def started(d: RoundDecisions) -> dict[int, tuple[int, ...]]:
    return {s.job_id: s.gpu_ids for s in d.starts}


def waiting(d: RoundDecisions) -> set[int]:
    return {w.job_id for w in d.waits}


# -- registry ---------------------------------------------------------------------------------------


def test_registry_has_the_six_standard_names_and_ours() -> None:
    assert POLICY_NAMES == ("fifo", "sjf", "srtf", "tiresias", "sjf-ffs", "sjf-bsbf", "sjf-bsbf-fair")
    for name in POLICY_NAMES:
        policy = get_policy(name)
        assert policy.name == name
        # sjf-bsbf-fair preempts only borrowed work when quotas are set (docs/FAIRNESS.md)
        assert policy.preemptive is (name in ("srtf", "tiresias", "sjf-bsbf-fair"))


def test_every_policy_declares_its_skip_rule() -> None:
    # the capacity rule ("fewer usable GPUs than the smallest gang: nothing starts") holds only for
    # a policy that never preempts; only the co-locating policies count GPUs holding one job
    for name in POLICY_NAMES:
        rule = get_policy(name).skip_rule
        assert isinstance(rule, SkipRule) and rule.horizon is not None
        assert rule.capacity is (name in ("fifo", "sjf", "sjf-ffs", "sjf-bsbf"))
        assert rule.shares is (name in ("sjf-ffs", "sjf-bsbf", "sjf-bsbf-fair"))


def test_unknown_policy_lists_valid_names() -> None:
    valid = "valid policies: fifo, sjf, srtf, tiresias, sjf-ffs, sjf-bsbf"
    with pytest.raises(UnknownPolicyError, match=valid):
        get_policy("lottery")
    with pytest.raises(ValueError):
        get_policy("")


# -- gang placement (shared by every policy) ----------------------------------------------------------


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_gang_prefers_one_node_then_fewest_nodes(name: str) -> None:
    # 3 nodes × 4 GPUs. Busy: GPUs 0,1,2 (node-00 has 1 idle: 3), GPU 4 (node-01: 5,6,7 idle),
    # node-02 all idle (8..11). Memory 40,000 MB per job on 49,140 MB GPUs: no sharing possible.
    profile = FakeProfile(memory={"m": (40_000, 0)})
    cluster = Cluster.uniform(3, 4)
    busy = [running(job(100, gpus=3, iterations=10**6), (0, 1, 2)), running(job(101, iterations=10**6), (4,))]
    # 3-GPU job: best single node = node-01 (3 idle, fewest that hold it) → 5,6,7
    d = decide(name, snap(cluster, [job(1, gpus=3, iterations=10)], busy), profile)
    assert started(d) == {1: (5, 6, 7)}
    # 5-GPU job: no single node; fewest nodes = node-02 (4) + best fit for 1 more = node-00's GPU 3
    d = decide(name, snap(cluster, [job(2, gpus=5, iterations=10)], busy), profile)
    assert started(d) == {2: (3, 8, 9, 10, 11)}


# -- TESTING.md scenarios -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_two_16_gpu_gangs_on_16_gpus_exactly_one_starts(name: str) -> None:
    # 40,000 MB each on 49,140 MB GPUs: they cannot co-locate, so only one gang can hold the 16 GPUs.
    profile = FakeProfile(memory={"m": (40_000, 0)})
    d = decide(name, snap(Cluster.uniform(2, 8), [job(1, gpus=16), job(2, gpus=16, submit=1)]), profile)
    assert len(d.starts) == 1
    assert sorted(d.starts[0].gpu_ids) == list(range(16))
    other = 2 if d.starts[0].job_id == 1 else 1
    assert waiting(d) == {other}


def unhealthy_node() -> Cluster:
    return Cluster(tuple(GPU(i, "node-00", i, 49_140, healthy=i < 6) for i in range(8)))


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_unhealthy_gpus_get_no_work(name: str) -> None:
    # GPUs 6–7 unhealthy; a 6-GPU job (shorter and earlier, so first in every order) and a 2-GPU job.
    # With 40,000 MB per job nothing can share: the 6-GPU job takes 0–5, the 2-GPU job waits.
    profile = FakeProfile(memory={"m": (40_000, 0)})
    pending = [job(1, gpus=6, iterations=10), job(2, gpus=2, iterations=100, submit=1)]
    d = decide(name, snap(unhealthy_node(), pending), profile)
    assert started(d) == {1: (0, 1, 2, 3, 4, 5)}
    assert waiting(d) == {2}


@pytest.mark.parametrize("name", SHARING)
def test_unhealthy_gpus_never_shared_either(name: str) -> None:
    # Small jobs that may share: the 2-GPU job may join the 6-GPU job, but never on GPUs 6–7.
    pending = [job(1, gpus=6, iterations=10), job(2, gpus=2, iterations=100, submit=1)]
    d = decide(name, snap(unhealthy_node(), pending))
    for start in d.starts:
        assert set(start.gpu_ids) <= set(range(6))


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_jobs_needing_a_whole_gpu_never_share(name: str) -> None:
    # One 16,000 MB GPU; each job needs 16,000 MB at every sub-batch: alone it fits exactly, paired
    # it would need 32,000 MB (+ reserve).
    profile = FakeProfile(memory={"m": (16_000, 0)})
    cluster = Cluster.uniform(1, 1, 16_000)
    d = decide(name, snap(cluster, [job(1, iterations=10), job(2, iterations=20, submit=1)]), profile)
    assert started(d) == {1: (0,)}
    assert waiting(d) == {2}
    # …and with one already running, the other still waits (and nothing is preempted: job 1 is shorter)
    d = decide(
        name,
        snap(cluster, [job(2, iterations=20, submit=1)], [running(job(1, iterations=10), (0,))]),
        profile,
    )
    assert d.starts == () and d.preemptions == ()
    assert waiting(d) == {2}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_gang_larger_than_healthy_gpus_waits_with_reason(name: str) -> None:
    d = decide(name, snap(unhealthy_node(), [job(1, gpus=8), job(2, gpus=1, submit=5)]))
    assert 1 in waiting(d)
    reason = next(w.reason for w in d.waits if w.job_id == 1)
    assert "6 healthy GPUs" in reason
    assert 2 in started(d)  # the impossible job blocks nobody, not even under strict FIFO


# -- FIFO ----------------------------------------------------------------------------------------------


def test_fifo_head_of_line_blocking() -> None:
    # 2 nodes × 4; GPUs 0,1 busy. Arrival order: j1 (1 GPU), j2 (8 GPUs), j3 (1 GPU).
    # j1 → best fit node-00 (2 idle) → GPU 2; j2 needs 8, 5 idle → waits; j3 waits behind j2.
    cluster = Cluster.uniform(2, 4)
    busy = [running(job(100, gpus=2, iterations=10**6), (0, 1))]
    pending = [job(3, submit=2), job(2, gpus=8, submit=1), job(1, submit=0)]
    d = decide("fifo", snap(cluster, pending, busy))
    assert started(d) == {1: (2,)}
    assert waiting(d) == {2, 3}
    assert "behind job 2" in next(w.reason for w in d.waits if w.job_id == 3)
    assert d.preemptions == ()


def test_fifo_ties_by_id() -> None:
    d = decide("fifo", snap(Cluster.uniform(1, 1), [job(7, submit=5), job(4, submit=5)]))
    assert started(d) == {4: (0,)}


# -- SJF and SRTF --------------------------------------------------------------------------------------


def test_sjf_backfills_smaller_jobs() -> None:
    # 1 node × 4, GPUs 0,1 busy. P: j1 = 10 s (4 GPUs), j2 = 100 s (2 GPUs), j3 = 1000 s (1 GPU).
    # j1 does not fit (2 idle) → skipped; j2 takes 2,3; j3 waits.
    busy = [running(job(100, gpus=2, iterations=10**6), (0, 1))]
    pending = [job(3, iterations=1000), job(2, gpus=2, iterations=100), job(1, gpus=4, iterations=10)]
    d = decide("sjf", snap(Cluster.uniform(1, 4), pending, busy))
    assert started(d) == {2: (2, 3)}
    assert waiting(d) == {1, 3}
    assert d.preemptions == ()


def test_sjf_orders_by_remaining_time_not_size() -> None:
    # Same gang, P_j = (iterations − done) × iter_time: j1 = (100 − 90) × 2 = 20 s, j2 = 30 × 1 = 30 s
    pending = [job(2, iterations=30), job(1, iterations=100, done=90, iter_time_s=2.0)]
    d = decide("sjf", snap(Cluster.uniform(1, 1), pending))
    assert started(d) == {1: (0,)}


def test_srtf_preempts_longer_running_job() -> None:
    # 2 GPUs; R runs on both with 1000 s left; S (10 s, 1 GPU) and L (5000 s, 1 GPU) wait.
    # Ranking S(10) < R(1000) < L(5000): S admitted (1 GPU left), R needs 2 → preempted,
    # L fits the last GPU → admitted. S → GPU 0, L → GPU 1.
    r = running(job(100, gpus=2, iterations=1000), (0, 1))
    d = decide("srtf", snap(Cluster.uniform(1, 2), [job(1, iterations=10), job(2, iterations=5000)], [r]))
    assert [p.job_id for p in d.preemptions] == [100]
    assert started(d) == {1: (0,), 2: (1,)}


def test_srtf_keeps_shorter_running_job() -> None:
    r = running(job(100, gpus=2, iterations=10), (0, 1))
    d = decide("srtf", snap(Cluster.uniform(1, 2), [job(1, iterations=100)], [r]))
    assert d.preemptions == () and d.starts == ()
    assert waiting(d) == {1}


@pytest.mark.parametrize("name", ["srtf", "tiresias"])
def test_a_running_job_on_unhealthy_gpus_costs_only_its_healthy_ones(name: str) -> None:
    # GPUs 6–7 unhealthy. R (10 s left, first in both rankings) runs on GPUs 5–7: it costs only
    # GPU 5, so 6 − 1 = 5 GPUs are left for the 5-GPU job, which starts on the idle 0–4 (counting
    # R's three GPUs would leave 3, and it would wait).
    r = running(job(100, gpus=3, iterations=10), (5, 6, 7))
    d = decide(name, snap(unhealthy_node(), [job(1, gpus=5, iterations=100, submit=1)], [r]))
    assert d.preemptions == ()
    assert started(d) == {1: (0, 1, 2, 3, 4)}


def test_sjf_never_preempts() -> None:
    r = running(job(100, gpus=2, iterations=1000), (0, 1))
    d = decide("sjf", snap(Cluster.uniform(1, 2), [job(1, iterations=1)], [r]))
    assert d.preemptions == () and d.starts == ()


# -- Tiresias ------------------------------------------------------------------------------------------


def test_tiresias_thresholds_are_stated() -> None:
    assert QUEUE_THRESHOLD_GPU_S == 3_200
    assert STARVATION_FACTOR == 1.0


def test_tiresias_high_queue_preempts_low_queue() -> None:
    # R has attained 5,000 GPU-s ≥ 3,200 → low queue; N (0 GPU-s) is high → N runs, R is preempted,
    # even though R was submitted first and is shorter.
    r = running(job(100, gpus=2, iterations=10, attained=5000), (0, 1))
    d = decide("tiresias", snap(Cluster.uniform(1, 2), [job(1, iterations=10**6, submit=50)], [r], now=100))
    assert [p.job_id for p in d.preemptions] == [100]
    assert started(d) == {1: (0,)}


def test_tiresias_fifo_within_a_queue() -> None:
    # Both high: the earlier submission wins, whatever its length.
    pending = [job(2, iterations=1, submit=10), job(1, iterations=10**6, submit=5)]
    d = decide("tiresias", snap(Cluster.uniform(1, 1), pending, now=20))
    assert started(d) == {1: (0,)}


@pytest.mark.parametrize(("waited", "promoted"), [(3999.0, False), (4001.0, True)])
def test_tiresias_starvation_guard(waited: float, promoted: bool) -> None:
    # L: 2 GPUs, attained 8,000 GPU-s → low queue, executed 8,000 / 2 = 4,000 s. R runs in the low
    # queue too (5,000 GPU-s; started at 0 without waiting, so not promoted): same queue, the
    # running job is ahead. L is promoted once it has waited > 1.0 × 4,000 s; then, high, it
    # preempts R.
    now = 10_000.0
    low = job(1, gpus=2, attained=8000, submit=0, queued_since=now - waited)
    other = running(job(100, gpus=2, attained=5000, submit=50), (0, 1))
    d = decide("tiresias", snap(Cluster.uniform(1, 2), [low], [other], now=now))
    if promoted:
        assert [p.job_id for p in d.preemptions] == [100]
        assert started(d) == {1: (0, 1)}
    else:
        assert d.preemptions == () and d.starts == ()


def test_tiresias_promoted_job_waits_for_running_high_queue_jobs() -> None:
    # Promoted L (waited 5,000 s > 4,000 s) joins the high queue behind the running H (100 GPU-s):
    # no preemption inside a queue, whatever the submit times.
    now = 10_000.0
    low = job(1, gpus=2, attained=8000, submit=0, queued_since=now - 5000)
    high = running(job(100, gpus=2, attained=100, submit=50), (0, 1))
    d = decide("tiresias", snap(Cluster.uniform(1, 2), [low], [high], now=now))
    assert d.preemptions == () and d.starts == ()


# -- SJF-FFS -------------------------------------------------------------------------------------------

# Resident "r" holds GPU 0; incoming "j": mem 2,000 + 100·b MB (b=32: 5,200, 16: 3,600).
# ξ = 3.0 for both: sharing never pays (symmetric ξ ≥ 1.5), which only SJF-BSBF checks.
HURTS = FakeProfile(memory={"r": (6000, 0), "j": (2000, 100)}, slowdowns={("j", "r"): (3.0, 3.0)})


def resident(memory_user: str = "r", iterations: int = 100) -> RunningJob:
    return running(job(100, model=memory_user, iterations=iterations), (0,))


def test_ffs_shares_without_benefit_check() -> None:
    # room = 16,000 − 6,000 − 1,024 = 8,976 ≥ 5,200 → full batch fits; FFS shares anyway.
    d = decide("sjf-ffs", snap(Cluster.uniform(1, 1, 16_000), [job(1, model="j")], [resident()]), HURTS)
    (start,) = d.starts
    assert (start.gpu_ids, start.sub_batch, start.accum_steps) == ((0,), 32, 1)
    (share,) = start.shares
    assert share.partner_id == 100 and share.xi_self == 3.0
    assert share.t_con_s > share.t_seq_s  # explained honestly: it hurts


def test_ffs_takes_largest_sub_batch_that_fits() -> None:
    # Resident needs 11,000 MB: room = 16,000 − 11,000 − 1,024 = 3,976 → 32 (5,200) no, 16 (3,600) yes
    profile = dataclasses.replace(HURTS, memory={"r": (11_000, 0), "j": (2000, 100)})
    d = decide("sjf-ffs", snap(Cluster.uniform(1, 1, 16_000), [job(1, model="j")], [resident()]), profile)
    (start,) = d.starts
    assert (start.sub_batch, start.accum_steps) == (16, 2)


def test_ffs_first_fit_lowest_gpu() -> None:
    # Two residents on GPUs 0 and 1 (2 GPUs, both busy): first fit = GPU 0.
    run = [running(job(100, model="r"), (1,)), running(job(101, model="r"), (0,))]
    d = decide("sjf-ffs", snap(Cluster.uniform(1, 2, 16_000), [job(1, model="j")], run), HURTS)
    assert started(d) == {1: (0,)}
    assert d.starts[0].shares[0].partner_id == 101


# -- SJF-BSBF ------------------------------------------------------------------------------------------


def test_bsbf_refuses_sharing_that_hurts() -> None:
    # ξ = 3 both, A = 100 s (100 × 1 s), B = 100 s: threshold (6 − 1 − 1)·A = 400 s > B → waits.
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 1, 16_000), [job(1, model="j")], [resident()]), HURTS)
    assert d.starts == ()
    (wait,) = d.waits
    assert "T_con < T_seq" in wait.reason


def test_bsbf_shares_when_the_waiting_job_ends_first() -> None:
    # Same ξ = 3, but B = 10,000 s ≫ A: at b = 32, A = 100, ξa·A = 300 < ξb·B → a ends first:
    # T_con = 5,000 + (1 − 1/6)·3·100 = 5,250 < T_seq = 10,000 + 50. Smaller sub-batches only add
    # accumulation time at the same ξ, so b = 32.
    run = [resident(iterations=10_000)]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 1, 16_000), [job(1, model="j")], run), HURTS)
    (start,) = d.starts
    assert (start.gpu_ids, start.sub_batch) == ((0,), 32)
    (share,) = start.shares
    assert share.t_con_s == pytest.approx(5250)
    assert share.t_seq_s == pytest.approx(10_050)
    assert "T_con 5250 s < T_seq 10050 s" in start.reason


def test_bsbf_enough_idle_gpus_means_idle_only() -> None:
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 2), [job(1)], [running(job(100, iterations=10**4), (0,))]))
    assert started(d) == {1: (1,)}
    assert d.starts[0].shares == ()


def test_bsbf_best_sharing_benefit_first_and_one_partner_per_gpu() -> None:
    # 2 GPUs busy: R1 (B = 100 s) on GPU 0, R2 (B = 1,000 s) on GPU 1; ξ = 1.3 everywhere (PLAIN).
    # J1: A = 1,000: with R1 T_con = 500 + 0.8·100 = 580 (T_seq 600); with R2: 1,300 ≥ 1,300 →
    # 500 + 0.8·1,000 = 1,300 (T_seq 1,500) → R1 first. J2 (A = 2,000) then: R1 is taken; R2:
    # 1,000 + 0.8·1,000 = 1,800 < 2,000 → shares GPU 1. J3: no idle, no shareable GPU → waits.
    run = [running(job(100, iterations=100), (0,)), running(job(101, iterations=1000), (1,))]
    pending = [job(3, iterations=3000), job(2, iterations=2000), job(1, iterations=1000)]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 2), pending, run))
    assert started(d) == {1: (0,), 2: (1,)}
    by_job = {s.job_id: s.shares for s in d.starts}
    assert [(s.partner_id, round(s.t_con_s), round(s.t_seq_s)) for s in by_job[1]] == [(100, 580, 600)]
    assert [(s.partner_id, round(s.t_con_s), round(s.t_seq_s)) for s in by_job[2]] == [(101, 1800, 2000)]
    assert waiting(d) == {3}
    assert d.preemptions == ()


def test_bsbf_job_started_alone_this_round_becomes_a_resident() -> None:
    # Empty 1-GPU cluster: J1 (100 s) starts alone; J2 (2,000 s) judged against it: A = 2,000,
    # B = 100, ξ 1.3: T_con = 1,000 + 0.8·100 = 1,080 < T_seq = 100 + 1,000 → shares GPU 0.
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 1), [job(2, iterations=2000), job(1, iterations=100)]))
    assert started(d) == {1: (0,), 2: (0,)}
    assert d.starts[0].shares == ()
    assert d.starts[1].shares[0].t_con_s == pytest.approx(1080)


def test_bsbf_picks_sub_batch_under_memory() -> None:
    # Same numbers as test_sharing: incoming "a" (mem 1,000 + 100·b), resident "b" (10,000 MB, B =
    # 100 s), GPU 12,800 MB → room 1,776 MB → b = 4 (T_con 165 < T_seq 185), 8 accumulation steps.
    profile = FakeProfile(
        memory={"a": (1000, 100), "b": (10_000, 0)},
        slowdowns={("a", 16, "b", 32): (1.2, 1.2), ("a", 8, "b", 32): (1.05, 1.05)},
    )
    run = [running(job(100, model="b"), (0,))]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 1, 12_800), [job(1, model="a")], run), profile)
    (start,) = d.starts
    assert (start.sub_batch, start.accum_steps) == (4, 8)
    assert start.shares[0].t_con_s == pytest.approx(165)
    # with a 49,140 MB GPU, b = 8 (T_con 120) wins instead
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 1), [job(1, model="a")], run), profile)
    assert (d.starts[0].sub_batch, d.starts[0].accum_steps) == (8, 4)


def test_bsbf_gang_combines_idle_and_shared_gpus() -> None:
    # 3 GPUs: R on GPU 0 (B = 1,000 s); GPU 1 holds "big" (48,500 MB: 49,140 − 48,500 − 1,024 < 0,
    # no room, not a resident); GPU 2 idle. J (2 GPUs, A = 500 s) takes idle GPU 2 + R's GPU 0:
    # ξ 1.3, ξa·A = 650 < ξb·B = 1,300 → T_con = 500 + 0.8·500 = 900 < T_seq = 1,000 + 250.
    profile = FakeProfile(memory={"m": (1000, 0), "big": (48_500, 0)})
    run = [running(job(100, iterations=1000), (0,)), running(job(101, model="big", iterations=10**5), (1,))]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 3), [job(1, gpus=2, iterations=500)], run), profile)
    (start,) = d.starts
    assert start.gpu_ids == (0, 2)
    assert [(s.partner_id, s.gpu_ids, s.t_con_s) for s in start.shares] == [(100, (0,), pytest.approx(900))]


def test_bsbf_no_sharing_when_config_forbids_pairs() -> None:
    d = decide(
        "sjf-bsbf",
        snap(Cluster.uniform(1, 1), [job(2, iterations=2000), job(1, iterations=100)], max_jobs_per_gpu=1),
    )
    assert started(d) == {1: (0,)}
    assert waiting(d) == {2}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_explain_false_gives_the_same_decisions(name: str) -> None:
    run = [running(job(100, iterations=100), (0,)), running(job(101, gpus=2, iterations=1000), (1, 2))]
    pending = [job(i, gpus=1 + i % 3, iterations=50 * i, submit=i) for i in range(1, 9)]
    s = snap(Cluster.uniform(2, 2), pending, run)
    full = decide(name, s)
    quiet = get_policy(name).decide(s, PLAIN, explain=False)
    assert (quiet.starts, quiet.preemptions) == (full.starts, full.preemptions)
    assert {s.job_id for s in full.starts} | waiting(full) == set(range(1, 9))


def test_bsbf_picks_the_cheapest_paying_resident_near_the_threshold() -> None:
    # ξ = 2 both ways: (1 − 1/4)·2 = 1.5 ≥ 1, so sharing pays only if B > (4 − 1 − 1)·A = 200 s
    # (A = 100 s). Residents: B = 150 → a first: T_con = 75 + 0.75·2·100 = 225 ≥ T_seq = 200, no;
    # B = 210 → T_con = 105 + 150 = 255 < 260, yes; B = 400 → 200 + 150 = 350 < 450, yes.
    # Best sharing benefit first = lowest T_con = the resident with B = 210 (GPU 1).
    profile = FakeProfile(slowdowns={("j", "r"): (2.0, 2.0)})
    run = [running(job(100 + i, model="r", iterations=b), (i,)) for i, b in enumerate([150, 210, 400])]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 3), [job(1, model="j", iterations=100)], run), profile)
    (start,) = d.starts
    assert start.gpu_ids == (1,)
    (share,) = start.shares
    assert (share.partner_id, share.t_con_s, share.t_seq_s) == (101, pytest.approx(255), pytest.approx(260))


@pytest.mark.parametrize("other_model", ["m", "m2"])
def test_bsbf_equal_t_con_goes_to_the_resident_that_ends_sooner(other_model: str) -> None:
    # ξ = 1.3 for every pair and 1,000 MB for every model (PLAIN's defaults): κ = (1 − 1/2.6)·1.3
    # = 0.8 < 1, so every B pays. J: A = 1,000 s ≥ B → T_con = 500 + 0.8·B. R1 (submitted at 5)
    # has B = 100 s; R2 (submitted at 1) has B one ulp above 100 s, which 500 + 0.8·B rounds away:
    # both T_con are 580.0 to the bit. The tie goes to the smaller B (R1: it ends sooner) whether
    # R2 runs the same model as R1 (one group of residents, searched in B order) or another (two
    # groups, merged by the heap); before, the first case chose R1 and the second R2.
    r1 = job(100, iterations=200, done=100.0, submit=5.0)
    r2 = job(101, model=other_model, iterations=200, done=math.nextafter(100.0, 0.0), submit=1.0)
    assert r2.remaining_iterations > r1.remaining_iterations
    assert 500 + 0.8 * (r2.remaining_iterations * 1.0) == 500 + 0.8 * 100.0 == 580.0
    run = [running(r1, (0,)), running(r2, (1,))]
    d = decide("sjf-bsbf", snap(Cluster.uniform(1, 2), [job(1, iterations=1000)], run))
    (start,) = d.starts
    (share,) = start.shares
    assert (start.gpu_ids, share.partner_id, share.t_con_s) == ((0,), 100, 580.0)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_job_too_big_for_any_gpu_waits_without_blocking(name: str) -> None:
    # "huge" needs 60,000 MB per GPU at every sub-batch (static memory) > 49,140 MB: it can never
    # start, says so, and does not hold back the job behind it — not even under strict FIFO.
    profile = FakeProfile(memory={"huge": (60_000, 0), "m": (1000, 0)})
    d = decide(name, snap(Cluster.uniform(1, 1), [job(1, model="huge"), job(2, submit=1)]), profile)
    assert started(d) == {2: (0,)}
    assert "49140 MB" in next(w.reason for w in d.waits if w.job_id == 1)


TRACE_MODELS = [
    ("vgg16", 16),
    ("vgg19", 16),
    ("resnet18", 128),
    ("shufflenet_v2_x1_0", 128),
    ("bert", 4),
    ("gpt2", 4),
    ("dqn", 128),
    ("a2c", 64),
]


def test_bsbf_with_the_shipped_profile_follows_the_pairwise_rule() -> None:
    # With the real profile (TableProfile from Gavel's measurements), for every pair of the SJF-BSBF
    # testbed models: the waiting job joins the resident iff the pairwise rule on the profile's
    # numbers says it pays (plan_pair: best sub-batch under memory, then T_con < T_seq).
    from scheduling.core.sharing import plan_pair
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    cluster = Cluster.uniform(1, 1)
    room = 49_140 - 1024
    outcomes = set()
    for waiting_model, waiting_batch in TRACE_MODELS:
        for resident_model, resident_batch in TRACE_MODELS:
            resident = Job(100, "t", resident_model, resident_batch, 1, 2000, 0.0, 0.2)
            incoming = Job(1, "t", waiting_model, waiting_batch, 1, 1000, 1.0, 0.2)
            expected = plan_pair(
                profile,
                incoming,
                resident,
                resident_batch,
                room - profile.memory_mb(resident, resident_batch),
            )
            d = get_policy("sjf-bsbf").decide(snap(cluster, [incoming], [running(resident, (0,))]), profile)
            pays = expected is not None and expected.beneficial
            assert bool(d.starts) is pays, (waiting_model, resident_model)
            if pays:
                assert d.starts[0].sub_batch == expected.sub_batch
                assert d.starts[0].shares[0].t_con_s == pytest.approx(expected.t_con_s)
            outcomes.add(pays)
    assert outcomes == {True, False}  # the table holds pairs that pay and pairs that hurt
