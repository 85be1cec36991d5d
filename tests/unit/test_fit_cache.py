"""A round asks whether each pending job can ever start once per distinct
:func:`~scheduling.core.profile_cache.fit_key` (``never_fits_reason``'s cache on the round
state), and the quota gate counts the owed gangs once per distinct tenant and key
(``startable_gangs``). Both must answer exactly as the per-job code they replace: the reason
text computed from scratch for every job, and the gang counts of a loop over every job, in the
same order (the owed total is a float sum over that order). Random clusters of several memories,
types and unhealthy GPUs, and random jobs, some of which can never start."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.gpu_types import memory_desc_of
from scheduling.core.placement import largest_fitting_sub_batch, never_fits_reason, unfit_reason
from scheduling.core.quota import startable_gangs
from scheduling.core.round_state import RoundState, healthy_memory_desc
from scheduling.core.types import GPU, Cluster, Job, SchedulerConfig, Snapshot
from tests.unit.fakes import FakeProfile, job

# mem(b) = static + per_sample · b MB per GPU, batch 32: "big" never fits 40,000 MB, "grow" needs
# 42,000 MB at 32 and 18,000 at 8, "small" fits anything.
PROFILE = FakeProfile(memory={"big": (60_000, 0), "grow": (10_000, 1_000), "small": (1_000, 0)})
TYPES = ("v100", "a100", "t4")

gpus_st = st.lists(
    st.tuples(st.sampled_from((16_000, 40_000, 80_000)), st.sampled_from(TYPES[:2]), st.booleans()),
    min_size=1,
    max_size=12,
)
jobs_st = st.lists(
    st.tuples(
        st.sampled_from(("big", "grow", "small")),
        st.integers(0, 14),  # 0 GPUs and more than the cluster have reasons too
        st.sampled_from(((), ("v100",), ("a100",), ("t4",), ("v100", "a100"))),
        st.sampled_from(("a", "b", "c")),
        st.sampled_from((None, 20_000.0)),
    ),
    max_size=40,
)


def snapshot_of(gpus: list[tuple[int, str, bool]], specs: list[tuple]) -> Snapshot:
    cluster = Cluster(
        tuple(GPU(i, f"node-{i // 4}", i % 4, mem, kind, ok) for i, (mem, kind, ok) in enumerate(gpus))
    )
    pending = tuple(
        dataclasses.replace(job(i, model=m, gpus=g, tenant=t), gpu_types=types, memory_mb=mem)
        for i, (m, g, types, t, mem) in enumerate(specs)
    )
    return Snapshot(1000.0, cluster, pending, (), SchedulerConfig())


def reference_reason(snapshot: Snapshot, j: Job) -> str | None:
    """The reason worked out for this job alone, as the code before the cache did."""
    memory = memory_desc_of(snapshot.cluster.gpus, lambda g: not j.gpu_types or g.gpu_type in j.gpu_types)
    if j.gpu_types and not memory:
        return f"accepts GPU types {', '.join(j.gpu_types)}; the cluster has no healthy GPU of them"
    return unfit_reason(j, memory, PROFILE, snapshot.config.min_sub_batch)


@settings(max_examples=300, deadline=None)
@given(gpus_st, jobs_st, st.randoms(use_true_random=False))
def test_cached_reason_is_the_one_worked_out_per_job(gpus: list, specs: list, rng) -> None:
    snapshot = snapshot_of(gpus, specs)
    state = RoundState(snapshot, PROFILE)
    asked = list(snapshot.pending) * 2  # each job twice, in a random order: hits and misses
    rng.shuffle(asked)
    for j in asked:
        assert never_fits_reason(j, state, PROFILE) == reference_reason(snapshot, j)


def reference_gangs(waiting: tuple[Job, ...], can_start) -> list[tuple[str, list[tuple[int, int]]]]:
    """The gate's loop as first written: one ``can_start`` per job."""
    gangs: dict[str, dict[int, int]] = {}
    for j in waiting:
        if can_start is not None and not can_start(j):
            continue
        sizes = gangs.setdefault(j.tenant, {})
        sizes[j.gpus] = sizes.get(j.gpus, 0) + 1
    return [(t, list(sizes.items())) for t, sizes in gangs.items()]


@settings(max_examples=300, deadline=None)
@given(gpus_st, jobs_st, st.booleans())
def test_startable_gangs_are_the_per_job_counts_in_order(gpus: list, specs: list, judged: bool) -> None:
    snapshot = snapshot_of(gpus, specs)
    state = RoundState(snapshot, PROFILE)
    can_start = (lambda j: never_fits_reason(j, state, PROFILE) is None) if judged else None
    got = startable_gangs(snapshot.pending, can_start)
    expected = reference_gangs(snapshot.pending, can_start)
    assert [(t, list(sizes.items())) for t, sizes in got.items()] == expected


def test_hand_counted_gangs() -> None:
    # 8 healthy GPUs of 40,000 MB: "big" (60,000 MB at every sub-batch) never fits, and a gang of
    # 9 is larger than the cluster; tenant b's only startable job is its 2-GPU "small"
    snapshot = snapshot_of(
        [(40_000, "v100", True)] * 8,
        [
            ("small", 1, (), "a", None),
            ("big", 1, (), "b", None),
            ("small", 2, (), "b", None),
            ("small", 1, (), "a", None),
            ("grow", 4, (), "a", None),
            ("small", 9, (), "a", None),
        ],
    )
    state = RoundState(snapshot, PROFILE)
    gangs = startable_gangs(snapshot.pending, lambda j: never_fits_reason(j, state, PROFILE) is None)
    assert gangs == {"a": {1: 2, 4: 1}, "b": {2: 1}}


@settings(max_examples=300, deadline=None)
@given(gpus_st, jobs_st)
def test_estimates_fit_test_is_unfit_reason(gpus: list, specs: list) -> None:
    """The estimates (``scheduling.core.eta.estimated_starts``) skip a job unless its gang is 1 …
    the healthy GPUs and a sub-batch fits its ``G_j``-th largest one: exactly when
    ``unfit_reason`` on all healthy GPUs is ``None``."""
    snapshot = snapshot_of(gpus, specs)
    memory = healthy_memory_desc(snapshot)
    min_sub = snapshot.config.min_sub_batch
    for j in snapshot.pending:
        fits = 1 <= j.gpus <= len(memory) and (
            largest_fitting_sub_batch(PROFILE, j, memory[j.gpus - 1], snapshot.config.min_sub_batch)
            is not None
        )
        assert fits == (unfit_reason(j, memory, PROFILE, min_sub) is None)
