"""A Start's reason formatted only when read (scheduling/core/start_reasons.py, types.Start): the
same text as an eagerly built one, whenever and however often it is read."""

from __future__ import annotations

import pickle

from scheduling.core.policies import get_policy
from scheduling.core.start_reasons import BestBenefitReason, ExclusiveReason
from scheduling.core.types import Cluster, Placement, RunningJob, SchedulerConfig, Share, Snapshot, Start
from tests.unit.fakes import FakeProfile, job

PLAIN = FakeProfile(memory={"m": (1000, 0)})  # 1,000 MB at every sub-batch; ξ 1.3 by default
GPUS = Cluster.uniform(3, 8).gpus  # id 8k + i is GPU i of node-0k


def test_a_reason_function_is_called_once_and_only_when_the_reason_is_read() -> None:
    calls: list[Start] = []

    def text(start: Start) -> str:
        calls.append(start)
        return f"job {start.job_id} on {len(start.gpu_ids)} GPUs"

    lazy = Start(7, (0, 1), 16, 2, (), text)
    assert calls == []
    assert lazy.reason == "job 7 on 2 GPUs"
    assert lazy.reason == "job 7 on 2 GPUs"
    assert calls == [lazy]
    eager = Start(7, (0, 1), 16, 2, (), "job 7 on 2 GPUs")
    assert lazy == eager and hash(lazy) == hash(eager)
    assert lazy != Start(7, (0, 1), 16, 2, (), "another text")
    expected = "Start(job_id=7, gpu_ids=(0, 1), sub_batch=16, accum_steps=2, shares=(), "
    assert repr(lazy) == repr(eager) == expected + "reason='job 7 on 2 GPUs')"


def test_a_pickled_start_carries_its_text_not_its_function() -> None:
    # a local function cannot be pickled: only the text can travel
    start = Start(3, (9,), 32, 1, (), lambda s: f"started job {s.job_id}")
    again = pickle.loads(pickle.dumps(start))
    assert again == start
    assert again.reason == "started job 3"


def test_the_exclusive_reason_names_the_starts_gpus_by_node_and_index() -> None:
    start = Start(1, (19, 20, 21), 32, 1, (), ExclusiveReason(GPUS))
    assert start.reason == "exclusive on idle GPUs node-02:3,4,5"
    assert Start(1, (8,), 32, 1, (), ExclusiveReason(GPUS)).reason == "exclusive on idle GPU node-01:0"


def test_the_shared_reason_lists_each_partner() -> None:
    shares = (
        Share(4, (0, 1), 1.304, 1.25, 150.4, 120.6),  # rounded: ξ 1.30/1.25, T_con 121 < T_seq 150
        Share(5, (19,), 1.304, 1.1, 90.0, 80.49),
    )
    start = Start(2, (0, 1, 19), 8, 4, shares, BestBenefitReason(GPUS))
    assert start.reason == (
        "best sharing benefit first, sub-batch 8 (4 accumulation steps): "
        "job 4 on GPUs node-00:0,1: ξ 1.30/1.25, T_con 121 s < T_seq 150 s; "
        "job 5 on GPU node-02:3: ξ 1.30/1.10, T_con 80 s < T_seq 90 s"
    )


def shared_snapshot() -> Snapshot:
    # 3 x 8 GPUs, all busy: job 1 alone on id 19 (node-02:3, B = 100 iterations x 1 s), job 3 on
    # the other 23 (B = 10,000 s). Job 2 (A = 10 s at its full batch 32, the smallest T_con as
    # ξ = 1.3 at every sub-batch) pays most with job 1: ξ_a·A = 13 < ξ_b·B = 130, so
    # T_con = B/2 + (1 - 1/(2·1.3))·1.3·A = 50 + 8 = 58 s, T_seq = B + A/2 = 105 s
    # (with job 3: 5,008 s < 10,005 s).
    short = job(1, iterations=100)
    long = job(3, gpus=23, iterations=10_000)
    others = tuple(g for g in range(24) if g != 19)
    return Snapshot(
        1000.0,
        Cluster.uniform(3, 8),
        (job(2, iterations=10),),
        (
            RunningJob(short, Placement(1, (19,), 32, 0.0)),
            RunningJob(long, Placement(3, others, 32, 0.0)),
        ),
        SchedulerConfig(),
    )


def test_a_quiet_rounds_reasons_read_later_are_those_of_an_explained_round() -> None:
    policy = get_policy("sjf-bsbf")
    quiet = policy.decide(shared_snapshot(), PLAIN, explain=False)
    # the same policy object decides again (its memo changes) before the first round's reason is read
    policy.decide(Snapshot(0.0, Cluster.uniform(1, 2), (job(9, gpus=2),), ()), PLAIN, explain=False)
    (start,) = quiet.starts
    assert start.reason == (
        "best sharing benefit first, sub-batch 32 (1 accumulation steps): "
        "job 1 on GPU node-02:3: ξ 1.30/1.30, T_con 58 s < T_seq 105 s"
    )
    assert quiet.starts == get_policy("sjf-bsbf").decide(shared_snapshot(), PLAIN, explain=True).starts
