"""Memory-aware choice of idle GPUs on heterogeneous clusters (scheduling/core/placement.py).

``start_on_idle`` used to take the GPUs :meth:`RoundState.pick_idle` chose by node fit alone; a job
whose memory did not fit them waited although other idle GPUs would hold it. Every expectation
below is computed by hand in the comments. Memory in MB; FakeProfile's ``memory[model] =
(static, per_sample)`` gives ``mem(b) = static + per_sample · b`` MB per GPU; ``job()`` has batch 32,
so its sub-batches are 32, 16, 8, 4, 2, 1.
"""

from __future__ import annotations

import pytest

from scheduling.core.placement import start_on_idle, unfit_reason
from scheduling.core.policies import POLICY_NAMES, get_policy
from scheduling.core.round_state import RoundState
from scheduling.core.types import GPU, Cluster, Job, Placement, RunningJob, SchedulerConfig, Snapshot, Start
from tests.unit.fakes import FakeProfile, job

# "big": 60,000 MB at every sub-batch; "grow": 10,000 + 1,000·b, so mem(32) = 42,000,
# mem(16) = 26,000, mem(8) = 18,000; "small": 1,000 MB at every sub-batch.
PROFILE = FakeProfile(memory={"big": (60_000, 0), "grow": (10_000, 1_000), "small": (1_000, 0)})


def cluster(*nodes: tuple[int, int]) -> Cluster:
    """Nodes ``node-00``, ``node-01``… of ``(GPUs, memory MB per GPU)``; ids dense in node order."""
    gpus: list[GPU] = []
    for n, (count, memory) in enumerate(nodes):
        gpus.extend(GPU(len(gpus), f"node-{n:02d}", i, memory) for i in range(count))
    return Cluster(tuple(gpus))


def snap(c: Cluster, pending: list[Job], run: list[RunningJob] | None = None) -> Snapshot:
    return Snapshot(1000.0, c, tuple(pending), tuple(run or ()), SchedulerConfig())


def running(j: Job, gpu_ids: tuple[int, ...]) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, 0.0))


# node-00: GPUs 0–3 of 80,000 MB; node-01: GPUs 4–5 of 40,000 MB (the reported cluster)
REPORTED = cluster((4, 80_000), (2, 40_000))


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_reported_case_starts_on_the_large_node_under_every_policy(name: str) -> None:
    # pick_idle(2) best fit: node-01 has the fewest idle GPUs (2) that hold the gang → GPUs 4,5 of
    # 40,000 MB < 60,000 at every sub-batch. The 2 largest idle GPUs have 80,000 ≥ 60,000, so the
    # largest sub-batch 32 fits; floor 60,000 MB leaves node-00 only (4 GPUs) → lowest ids 0,1.
    d = get_policy(name).decide(snap(REPORTED, [job(1, gpus=2, model="big")]), PROFILE)
    assert [(s.job_id, s.gpu_ids, s.sub_batch, s.accum_steps) for s in d.starts] == [(1, (0, 1), 32, 1)]
    assert d.waits == ()


def test_pick_idle_alone_still_offers_the_small_node() -> None:
    # The node-fit choice itself is unchanged (best fit on idle counts: node-01, 2 idle).
    state = RoundState(snap(REPORTED, []))
    assert state.pick_idle(2) == (4, 5)
    assert not state.uniform_memory


@pytest.mark.parametrize("name", ["sjf", "sjf-bsbf", "sjf-bsbf-fair"])
def test_largest_sub_batch_wins_over_the_node_fit_choice(name: str) -> None:
    # node-00: GPUs 0–3 of 48,000 MB; node-01: GPUs 4–5 of 40,000 MB. pick_idle(2) → 4,5 (best fit),
    # where "grow" fits only at sub-batch 16 (26,000 ≤ 40,000; 42,000 > 40,000) → 2 accumulation steps.
    # The 2 largest idle GPUs have 48,000 ≥ 42,000 = mem(32) → sub-batch 32 on GPUs 0,1 (floor 42,000).
    c = cluster((4, 48_000), (2, 40_000))
    d = get_policy(name).decide(snap(c, [job(1, gpus=2, model="grow")]), PROFILE)
    assert [(s.gpu_ids, s.sub_batch, s.accum_steps) for s in d.starts] == [((0, 1), 32, 1)]


@pytest.mark.parametrize("name", ["sjf", "sjf-bsbf"])
def test_a_job_that_fits_the_node_fit_choice_keeps_it(name: str) -> None:
    # "small" (1,000 MB) fits GPUs 4,5 at its largest sub-batch 32: nothing to improve, so the
    # node-fit choice stands and node-00's large GPUs stay idle.
    d = get_policy(name).decide(snap(REPORTED, [job(1, gpus=2, model="small")]), PROFILE)
    assert [(s.gpu_ids, s.sub_batch) for s in d.starts] == [((4, 5), 32)]


def test_small_job_then_big_job_both_start() -> None:
    # SJF order: job 1 (small, 10 s) before job 2 (big, 100 s). Job 1 → GPUs 4,5 (node fit, fits
    # at b = 32). Job 2: pick_idle(2) → node-00 (only node with idle GPUs) → 0,1 at b = 32.
    small = job(1, gpus=2, model="small", iterations=10)
    big = job(2, gpus=2, model="big", iterations=100)
    d = get_policy("sjf").decide(snap(REPORTED, [big, small]), PROFILE)
    assert {s.job_id: s.gpu_ids for s in d.starts} == {1: (4, 5), 2: (0, 1)}


def test_gang_across_nodes_uses_only_gpus_with_enough_memory() -> None:
    # node-00: 0–2 (80,000); node-01: 3–4 (40,000); node-02: 5–6 (80,000); node-03: 7–10 (80,000).
    # A 5-GPU "big" job: 5th largest idle memory = 80,000 ≥ 60,000 → b = 32, floor 60,000.
    # GPUs ≥ 60,000 per node: node-00 3, node-02 2, node-03 4 (node-01 none). No node holds 5 →
    # most first: node-03 (4: GPUs 7–10), 1 left → best fit among node-00 (3) and node-02 (2):
    # node-02, lowest id 5. Result 5,7,8,9,10 (pick_idle(5) alone would pick node-03 + node-01,
    # fewest idle ≥ 1 = node-01 with 2 → GPU 3 of 40,000 MB).
    c = cluster((3, 80_000), (2, 40_000), (2, 80_000), (4, 80_000))
    state = RoundState(snap(c, []))
    assert state.pick_idle(5) == (3, 7, 8, 9, 10)
    outcome = start_on_idle(state, job(1, gpus=5, model="big"), PROFILE, 1)
    assert isinstance(outcome, Start)
    assert (outcome.gpu_ids, outcome.sub_batch) == ((5, 7, 8, 9, 10), 32)
    assert state.idle_count == 11 - 5


def test_pick_idle_with_memory_and_idle_memory_desc() -> None:
    # REPORTED with GPU 0 busy: idle 1,2,3 (80,000) and 4,5 (40,000).
    blocker = job(9, model="small")
    state = RoundState(snap(REPORTED, [], [running(blocker, (0,))]))
    assert state.idle_memory_desc(3) == 80_000  # 80,000, 80,000, 80,000
    assert state.idle_memory_desc(4) == 40_000  # 80,000 ×3, then 40,000
    assert state.idle_memory_desc(6) is None  # only 5 idle
    assert state.pick_idle_with_memory(3, 60_000) == (1, 2, 3)
    assert state.pick_idle_with_memory(4, 60_000) is None  # only 3 idle GPUs have ≥ 60,000
    # floor 40,000: node-00 has 3, node-01 has 2 → a 2-gang goes to node-01 by best fit
    assert state.pick_idle_with_memory(2, 40_000) == (4, 5)
    # a 4-gang: no node has 4 → node-00's 3 first, then 1 from node-01 (lowest id 4)
    assert state.pick_idle_with_memory(4, 40_000) == (1, 2, 3, 4)


def test_wait_reason_names_the_best_idle_memory() -> None:
    # node-00: 0–1 (80,000), node-01: 2–3 (40,000); GPU 0 busy. never_fits: the 2nd largest healthy
    # GPU has 80,000 → could fit some day. Now: idle 1 (80,000), 2, 3 (40,000) → the 2 largest idle
    # offer 40,000 < 60,000 per GPU → waits, and says so.
    c = cluster((2, 80_000), (2, 40_000))
    s = snap(c, [job(1, gpus=2, model="big")], [running(job(9, model="small"), (0,))])
    d = get_policy("sjf").decide(s, PROFILE)
    assert d.starts == ()
    assert [w.job_id for w in d.waits] == [1]
    assert "40000 MB per GPU that its 2 largest idle GPUs offer" in d.waits[0].reason


def test_uniform_cluster_takes_the_fast_path() -> None:
    # All healthy GPUs equal → no memory floor: the choice is pick_idle's (best fit: node-01? both
    # nodes have 4 idle → the first in bucket order, node-00 → GPUs 0,1).
    state = RoundState(snap(Cluster.uniform(2, 4, 40_000), []))
    assert state.uniform_memory
    outcome = start_on_idle(state, job(1, gpus=2, model="grow"), PROFILE, 1)
    assert isinstance(outcome, Start)
    assert (outcome.gpu_ids, outcome.sub_batch) == ((0, 1), 16)  # 42,000 > 40,000 ≥ 26,000


# node-00: GPU 0 (80,000) runs resident job 9 ("small", 1,000 MB at b = 32); node-01: GPU 1
# (40,000) idle. Job 1 ("grow", 2 GPUs) needs 1 GPU beyond the idle one → shares GPU 0.
SMALL_IDLE = cluster((1, 80_000), (1, 40_000))
SHARING_POLICIES = ("sjf-bsbf", "sjf-bsbf-fair", "sjf-ffs")


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_sharing_with_a_smaller_idle_gpu_picks_a_sub_batch_that_fits_it(name: str) -> None:
    # Room on GPU 0: 80,000 − 1,000 − 1,024 (reserve) = 77,976 ≥ 42,000 = mem(32), so the finder
    # picks b = 32 (SJF-BSBF: fewest accumulation steps, smallest T_con; ξ = 1.3 → (1 − 1/2.6)·1.3
    # = 0.8 < 1, sharing pays for any B; SJF-FFS: the largest sub-batch with enough residents). But
    # idle GPU 1 has 40,000 < 42,000; b = 16 (26,000 MB) is the largest that fits it, and both
    # GPUs: the job starts on (0, 1) at b = 16, 2 accumulation steps (before, it waited).
    resident = job(9, model="small", iterations=1000)
    d = get_policy(name).decide(
        snap(SMALL_IDLE, [job(1, gpus=2, model="grow")], [running(resident, (0,))]), PROFILE
    )
    assert [(s.gpu_ids, s.sub_batch, s.accum_steps) for s in d.starts] == [((0, 1), 16, 2)]
    assert [share.partner_id for share in d.starts[0].shares] == [9]


@pytest.mark.parametrize("name", SHARING_POLICIES)
def test_the_smaller_sub_batch_is_judged_again_and_may_be_refused(name: str) -> None:
    # The same, but the pair (grow at 16, small at 32) is incompatible: b = 16 may not share with
    # job 9, b = 32 does not fit the idle GPU → the job waits, and its reason says both.
    profile = FakeProfile(memory=PROFILE.memory, incompatible=frozenset({("grow", 16, "small", 32)}))
    resident = job(9, model="small", iterations=1000)
    d = get_policy(name).decide(
        snap(SMALL_IDLE, [job(1, gpus=2, model="grow")], [running(resident, (0,))]), profile
    )
    assert d.starts == ()
    assert [w.job_id for w in d.waits] == [1]
    assert "its sub-batch 32 does not fit the memory of the idle GPUs; at 16:" in d.waits[0].reason


def test_a_gang_larger_than_the_healthy_gpus_is_counted_in_words() -> None:
    # before: "needs 1 GPUs but the cluster has only 0 healthy GPUs"
    assert unfit_reason(job(1, gpus=1), (), PROFILE, 1) == (
        "needs 1 GPU but the cluster has only 0 healthy GPUs: it cannot start until more GPUs are healthy"
    )
    assert unfit_reason(job(1, gpus=2), (40_000,), PROFILE, 1) == (
        "needs 2 GPUs but the cluster has only 1 healthy GPU: it cannot start until more GPUs are healthy"
    )
