"""Who may never share (issue 10, docs/LEARNING.md §3): property tests over random snapshots that
the sharing policies (sjf-bsbf, sjf-ffs, sjf-bsbf-fair) never co-locate a job that said
``sharing: never`` (as incoming job or as resident), a job of unknown memory (unless
``SchedulerConfig.share_unknown``), a pair whose slowdown is unknown (same), or a pair marked
incompatible at those sub-batches (always) — and small hand-made rounds showing that each rule is
what stops the share (with the rule lifted, the same job shares)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.core.policies import get_policy
from scheduling.core.types import (
    Cluster,
    Job,
    Placement,
    RoundDecisions,
    RunningJob,
    SchedulerConfig,
    Snapshot,
)
from tests.unit.fakes import FakeProfile

SHARING_POLICIES = ("sjf-bsbf", "sjf-ffs", "sjf-bsbf-fair")
MODELS = ("a", "b", "c", "d")
SUBS = (32, 16, 8)


@st.composite
def rule_profiles(draw: st.DrawFn) -> FakeProfile:
    """Gentle slowdowns and small memories (so that sharing often pays and fits), with random
    unknown-memory models, unknown model pairs and incompatible (model, sub-batch) pairs."""
    xi = st.floats(0.9, 1.6, allow_nan=False)
    pairs = [(x, y) for i, x in enumerate(MODELS) for y in MODELS[i:]]
    sides = [(m, sub) for m in MODELS for sub in SUBS]
    side_pairs = st.tuples(st.sampled_from(sides), st.sampled_from(sides))
    return FakeProfile(
        # a 38,000 MB job leaves about 11,000 MB: a partner of 300 MB per sample fits it only at a
        # smaller sub-batch, so a gang's partners may choose different sub-batches
        memory={
            m: (draw(st.sampled_from([1000, 4000, 12_000, 38_000])), draw(st.sampled_from([0, 100, 300])))
            for m in MODELS
        },
        slowdowns={
            **{(x, y): (draw(xi), draw(xi)) for x, y in pairs},
            **{(*x, *y): (draw(xi), draw(xi)) for x, y in draw(st.lists(side_pairs, max_size=6))},
        },
        accum_overhead=draw(st.sampled_from([0.0, 0.2])),
        unknown_memory=frozenset(draw(st.lists(st.sampled_from(MODELS), max_size=2))),
        unknown_pairs=frozenset(draw(st.lists(st.sampled_from(pairs), max_size=3))),
        incompatible=frozenset((*x, *y) for x, y in draw(st.lists(side_pairs, max_size=16))),
    )


@st.composite
def rule_snapshots(draw: st.DrawFn) -> tuple[Snapshot, FakeProfile]:
    """A valid state: running jobs alone or in allowed pairs, never two on a GPU beside a job that
    may not share; pending jobs of every kind, a third of them ``sharing_allowed=False``."""
    profile = draw(rule_profiles())
    cluster = Cluster.uniform(draw(st.integers(1, 2)), draw(st.integers(2, 4)), 49_140)
    config = SchedulerConfig(
        memory_reserve_mb=draw(st.sampled_from([0, 1024])),
        min_sub_batch=draw(st.sampled_from([1, 8])),
        share_unknown=draw(st.booleans()),
    )
    ids = iter(range(1, 1000))

    def new_job(gang: int, running: bool) -> Job:
        iterations = draw(st.integers(10, 4000))
        return Job(
            id=next(ids),
            tenant=draw(st.sampled_from(["t1", "t2"])),
            model=draw(st.sampled_from(MODELS)),
            batch_size=32,
            gpus=gang,
            iterations=iterations,
            submit_time=float(draw(st.integers(0, 50))),
            iter_time_s=draw(st.sampled_from([0.5, 1.0, 3.0])),
            iterations_done=draw(st.floats(0, iterations - 1)) if running else 0.0,
            sharing_allowed=draw(st.integers(0, 2)) > 0,
        )

    running: list[RunningJob] = []
    load: dict[int, int] = defaultdict(int)
    for _ in range(draw(st.integers(0, 6))):
        j = new_job(draw(st.integers(1, 2)), running=True)
        free = [g.id for g in cluster.gpus if load[g.id] == 0]
        if len(free) < j.gpus:
            continue
        chosen = draw(st.lists(st.sampled_from(free), min_size=j.gpus, max_size=j.gpus, unique=True))
        for g in chosen:
            load[g] += 1
        sub = draw(st.sampled_from(SUBS))
        running.append(RunningJob(j, Placement(j.id, tuple(sorted(chosen)), sub, 0.0)))
    pending = tuple(new_job(draw(st.integers(1, 3)), running=False) for _ in range(draw(st.integers(1, 8))))
    return Snapshot(100.0, cluster, pending, tuple(running), config), profile


def co_locations(snapshot: Snapshot, decisions: RoundDecisions) -> list[tuple[Job, int, Job, int]]:
    """Every new co-location the decisions make: ``(incoming job, its sub-batch, the job already on
    one of its GPUs, that job's sub-batch)``, starts taken in order."""
    preempted = {p.job_id for p in decisions.preemptions}
    on_gpu: dict[int, list[tuple[Job, int]]] = defaultdict(list)
    for rj in snapshot.running:
        if rj.job.id not in preempted:
            for g in rj.placement.gpu_ids:
                on_gpu[g].append((rj.job, rj.placement.sub_batch))
    pending = {j.id: j for j in snapshot.pending}
    pairs = []
    for start in decisions.starts:
        job = pending[start.job_id]
        for g in start.gpu_ids:
            pairs.extend((job, start.sub_batch, other, sub) for other, sub in on_gpu[g])
        for g in start.gpu_ids:
            on_gpu[g].append((job, start.sub_batch))
    return pairs


@pytest.mark.parametrize("name", SHARING_POLICIES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rule_snapshots())
def test_no_policy_co_locates_what_may_not_share(name: str, case: tuple[Snapshot, FakeProfile]) -> None:
    snapshot, profile = case
    unknown_ok = snapshot.config.share_unknown
    for job, sub, other, other_sub in co_locations(snapshot, get_policy(name).decide(snapshot, profile)):
        # sharing: never — neither the incoming job nor the one already there
        assert job.sharing_allowed and other.sharing_allowed
        # an incompatible pair never shares at those sub-batches, whatever share_unknown says
        assert (job.model, sub, other.model, other_sub) not in profile.incompatible
        assert (other.model, other_sub, job.model, sub) not in profile.incompatible
        if not unknown_ok:  # unknown memory, unknown slowdown: alone until something is measured
            assert profile.memory_known(job) and profile.memory_known(other)
            assert {(job.model, other.model), (other.model, job.model)}.isdisjoint(profile.unknown_pairs)


# -- each rule alone stops a share that pays --------------------------------------------------------
#
# One GPU holds a long resident r (10,000 iterations of 1 s left, B = 10,000 s); a short job p
# (A = 100 s) waits. With ξ = 1.2 on both sides (MODEL.md §2): T_seq = B + A/2 = 10,050 s; p ends
# first (ξ·A = 120 < ξ·B = 12,000), so T_con = B/2 + (1 − 1/(2·1.2))·1.2·A = 5,000 + 70 = 5,070 s
# < T_seq: sharing pays, and every sharing policy co-locates p with r — unless a rule forbids it.


def one_gpu_round(
    name: str,
    profile: FakeProfile,
    *,
    waiting_shares: bool = True,
    resident_shares: bool = True,
    share_unknown: bool = False,
) -> RoundDecisions:
    resident = Job(1, "t", "r", 32, 1, 10_000, 0.0, 1.0, sharing_allowed=resident_shares)
    waiting = Job(2, "t", "p", 32, 1, 100, 10.0, 1.0, sharing_allowed=waiting_shares)
    snapshot = Snapshot(
        60.0,
        Cluster.uniform(1, 1),
        (waiting,),
        (RunningJob(resident, Placement(1, (0,), 32, 0.0)),),
        SchedulerConfig(memory_reserve_mb=0, min_sub_batch=32, share_unknown=share_unknown),
    )
    return get_policy(name).decide(snapshot, profile)


GENTLE = {("p", "r"): (1.2, 1.2)}


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_the_hand_made_pair_shares_when_nothing_forbids_it(name: str) -> None:
    decisions = one_gpu_round(name, FakeProfile(slowdowns=GENTLE, accum_overhead=0.0))
    assert [(s.job_id, s.gpu_ids, [sh.partner_id for sh in s.shares]) for s in decisions.starts] == [
        (2, (0,), [1])
    ]
    share = decisions.starts[0].shares[0]
    assert (share.t_seq_s, share.t_con_s) == (pytest.approx(10_050.0), pytest.approx(5_070.0))


@pytest.mark.parametrize("name", SHARING_POLICIES)
@pytest.mark.parametrize("side", ["waiting", "resident"])
def test_sharing_never_keeps_the_pair_apart(name: str, side: str) -> None:
    decisions = one_gpu_round(
        name,
        FakeProfile(slowdowns=GENTLE, accum_overhead=0.0),
        waiting_shares=side != "waiting",
        resident_shares=side != "resident",
        share_unknown=True,  # not a matter of knowledge: never means never
    )
    assert decisions.starts == ()
    assert "never shares" in decisions.waits[0].reason or side == "resident"


@pytest.mark.parametrize("name", SHARING_POLICIES)
@pytest.mark.parametrize("unknown", ["p", "r"])
def test_unknown_memory_shares_only_with_share_unknown(name: str, unknown: str) -> None:
    profile = FakeProfile(slowdowns=GENTLE, accum_overhead=0.0, unknown_memory=frozenset({unknown}))
    assert one_gpu_round(name, profile).starts == ()
    assert [s.job_id for s in one_gpu_round(name, profile, share_unknown=True).starts] == [2]


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_unknown_slowdown_shares_only_with_share_unknown(name: str) -> None:
    profile = FakeProfile(slowdowns=GENTLE, accum_overhead=0.0, unknown_pairs=frozenset({("r", "p")}))
    assert one_gpu_round(name, profile).starts == ()
    assert [s.job_id for s in one_gpu_round(name, profile, share_unknown=True).starts] == [2]


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_an_incompatible_pair_never_shares_at_those_sub_batches(name: str) -> None:
    profile = FakeProfile(slowdowns=GENTLE, accum_overhead=0.0, incompatible=frozenset({("r", 32, "p", 32)}))
    assert one_gpu_round(name, profile).starts == ()
    assert one_gpu_round(name, profile, share_unknown=True).starts == ()
    # at other sub-batches the pair is another pair: marked at (32, 16), it still shares at (32, 32)
    other = FakeProfile(slowdowns=GENTLE, accum_overhead=0.0, incompatible=frozenset({("r", 32, "p", 16)}))
    assert [s.job_id for s in one_gpu_round(name, other).starts] == [2]


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_a_gang_is_not_paired_at_an_incompatible_common_sub_batch(name: str) -> None:
    # p (2 GPUs) joins r on GPU 0 and q on GPU 1. q leaves room for p only at sub-batch 16 or less
    # (p needs 1,000 + 100·b MB; q leaves 3,000 MB), r leaves room at any. SJF-BSBF pairs p with r
    # at 32 (the larger of two equal T_con) and with q at 16, so the gang's common sub-batch is 16
    # — where (p, r) is marked incompatible: it must wait. First fit takes 8 for both partners,
    # a pair never marked: it may share.
    profile = FakeProfile(
        memory={"p": (1000, 100), "r": (1000, 0), "q": (46_140, 0)},
        slowdowns={("p", "r"): (1.2, 1.2), ("p", "q"): (1.2, 1.2)},
        accum_overhead=0.0,
        incompatible=frozenset({("p", 16, "r", 32)}),
    )
    r, q = Job(1, "t", "r", 32, 1, 10_000, 0.0, 1.0), Job(3, "t", "q", 32, 1, 10_000, 0.0, 1.0)
    snapshot = Snapshot(
        60.0,
        Cluster.uniform(1, 2),
        (Job(2, "t", "p", 32, 2, 100, 10.0, 1.0),),
        (RunningJob(r, Placement(1, (0,), 32, 0.0)), RunningJob(q, Placement(3, (1,), 32, 0.0))),
        SchedulerConfig(memory_reserve_mb=0, min_sub_batch=8),
    )
    decisions = get_policy(name).decide(snapshot, profile)
    pairs = {(j.model, sub, o.model, o_sub) for j, sub, o, o_sub in co_locations(snapshot, decisions)}
    assert pairs.isdisjoint(profile.incompatible)
    assert pairs == ({("p", 8, "r", 32), ("p", 8, "q", 32)} if name == "sjf-ffs" else set())
