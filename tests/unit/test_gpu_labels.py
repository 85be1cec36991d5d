"""Reasons name GPUs as ``node:index`` — the label the dashboard, the API and the decisions'
``gpus`` field use — never by the round's cluster-wide GPU ids (``common.shapes.gpu_label``)."""

from __future__ import annotations

from common.shapes import gpu_label, gpu_list
from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, Placement, RunningJob, SchedulerConfig, Snapshot
from tests.unit.fakes import FakeProfile, job

PLAIN = FakeProfile(memory={"m": (1000, 0)})  # 1,000 MB at every sub-batch; ξ 1.3 by default


def test_the_label_of_a_gpu() -> None:
    cluster = Cluster.uniform(3, 8)
    # cluster-wide id 19 is the fourth GPU (index 3) of the third node
    assert cluster.gpus[19].label == gpu_label("node-02", 3) == "node-02:3"
    assert gpu_list([("node-02", 3), ("node-02", 4), ("node-01", 0)]) == "node-02:3,4; node-01:0"


def test_an_exclusive_start_names_its_gpus_by_node_and_index() -> None:
    # 3 x 8 GPUs; a 19-GPU job holds ids 0-18, so a 5-GPU job can only take ids 19-23:
    # node-02's GPUs 3 to 7
    big = job(1, gpus=19, iterations=10_000)
    snapshot = Snapshot(
        1000.0,
        Cluster.uniform(3, 8),
        (job(2, gpus=5),),
        (RunningJob(big, Placement(1, tuple(range(19)), 32, 0.0)),),
        SchedulerConfig(),
    )
    (start,) = get_policy("sjf").decide(snapshot, PLAIN).starts
    assert start.gpu_ids == (19, 20, 21, 22, 23)
    assert start.reason == "exclusive on idle GPUs node-02:3,4,5,6,7"


def test_a_shared_start_names_its_partners_gpu_by_node_and_index() -> None:
    # 3 x 8 GPUs, all busy: job 1 alone on id 19 (node-02:3, 10 iterations left), job 3 on the
    # other 23 (10,000 left). The 1-GPU job 2 shares with the short job 1 (the smaller T_con).
    short = job(1, iterations=10)
    long = job(3, gpus=23, iterations=10_000)
    others = tuple(g for g in range(24) if g != 19)
    snapshot = Snapshot(
        1000.0,
        Cluster.uniform(3, 8),
        (job(2, iterations=10),),
        (
            RunningJob(short, Placement(1, (19,), 32, 0.0)),
            RunningJob(long, Placement(3, others, 32, 0.0)),
        ),
        SchedulerConfig(),
    )
    (start,) = get_policy("sjf-bsbf").decide(snapshot, PLAIN).starts
    assert start.gpu_ids == (19,)
    assert "job 1 on GPU node-02:3: " in start.reason
    assert "GPU 19" not in start.reason
