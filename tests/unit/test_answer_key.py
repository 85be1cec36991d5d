"""The Profile contract's answer key (``scheduling.core.profile_cache.answer_key``): a profile's
answers do not depend on a job's gang size, so the per-round memo asks the profile once for jobs
that differ in gang size alone, and SJF-BSBF puts residents that differ in gang size alone in one
group (their memory fit and ``ξ`` against every waiting job are the same)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scheduling.core.policies.sjf_bsbf import BestBenefitFinder, BestBenefitMemo
from scheduling.core.profile_cache import CachedProfile, answer_key, fit_key
from scheduling.core.round_state import RoundState
from scheduling.core.types import Cluster, Job, Placement, RunningJob, Snapshot
from tests.unit.fakes import FakeProfile


@dataclass
class CountingProfile(FakeProfile):
    """The fake profile, counting the questions that reach it."""

    asked: list[str] = field(default_factory=list)

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        self.asked.append("iter_time_s")
        return super().iter_time_s(job, sub_batch)

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        self.asked.append("memory_mb")
        return super().memory_mb(job, sub_batch)

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        self.asked.append("sub_batches")
        return super().sub_batches(job, min_sub_batch)

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        self.asked.append("slowdown")
        return super().slowdown(a, sub_a, b, sub_b)


def job(job_id: int, model: str, gpus: int) -> Job:
    return Job(job_id, "t", model, 32, gpus, 1000, 0.0, 0.5)


def test_the_answer_key_leaves_out_the_gang_size_and_the_fit_key_keeps_it() -> None:
    one, eight = job(1, "resnet18", 1), job(2, "resnet18", 8)
    assert answer_key(one) == answer_key(eight) == ("resnet18", 32, None)
    assert fit_key(one) != fit_key(eight)  # whether a job can ever start does depend on its gang
    assert answer_key(replace(one, memory_mb=9000.0)) != answer_key(one)


def test_jobs_differing_in_gang_size_alone_are_asked_about_once() -> None:
    inner = CountingProfile(slowdowns={("resnet18", "vgg16"): (1.2, 1.4)})
    profile = CachedProfile(inner)
    partner = job(3, "vgg16", 2)
    for gpus in (1, 4, 8):
        a = job(gpus, "resnet18", gpus)
        assert profile.slowdown(a, 16, partner, 32) == (1.2, 1.4)
        assert profile.memory_mb(a, 16) == 1000.0
        assert profile.sub_batches(a) == (32, 16, 8, 4, 2, 1)
        assert profile.iter_time_s(a, 32) == 0.5
    assert sorted(inner.asked) == ["iter_time_s", "memory_mb", "slowdown", "sub_batches"]


def test_residents_differing_in_gang_size_alone_form_one_group() -> None:
    # four 49,140 MB GPUs, all busy alone: a 1-GPU and a 2-GPU resnet18 at the full batch (the
    # same memory room on every GPU), and a 1-GPU vgg16
    running = (
        RunningJob(job(10, "resnet18", 1), Placement(10, (0,), 32, 0.0)),
        RunningJob(job(11, "resnet18", 2), Placement(11, (1, 2), 32, 0.0)),
        RunningJob(job(12, "vgg16", 1), Placement(12, (3,), 32, 0.0)),
    )
    profile = FakeProfile()
    snapshot = Snapshot(0.0, Cluster.uniform(1, 4), (), running)
    state = RoundState(snapshot, profile, track_sharing=True)
    memo = BestBenefitMemo(profile)
    BestBenefitFinder(state, memo)
    # the fake's 1,000 MB a job and the reserve kept free on a shared GPU (1,024 MB by default)
    room = 49_140 - 1000 - snapshot.config.memory_reserve_mb
    assert sorted(memo.group_ids, key=str) == [
        (("resnet18", 32, None), 32, room),
        (("vgg16", 32, None), 32, room),
    ]
