"""The simulator's fidelity knobs (scheduling/sim/fidelity.py, docs/FIDELITY.md), by hand.

Jobs of 1 GPU, 1 s per iteration unless said; completions before arrivals before the round of
an instant; rounds on events (and no periodic ones) unless said.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from scheduling.core.metrics import percentile
from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, Job, SchedulerConfig, TiresiasConfig
from scheduling.sim.engine import SimConfig, SimResult, simulate
from scheduling.sim.fidelity import MURI_SIM, MURI_TESTBED, Fidelity, OverheadTable, overhead_table
from scheduling.sim.presets import PRESETS
from tests.unit.fakes import FakeProfile, job

EVENTS = {"round_interval_s": math.inf, "round_on_events": True, "restart_cost_s": 0.0}


def ends(result: SimResult) -> dict[int, float]:
    return {o.job_id: o.end_time for o in result.outcomes}


def run(jobs: list[Job], gpus: int = 1, policy: str = "fifo", **config) -> SimResult:
    return simulate(jobs, Cluster.uniform(1, gpus), get_policy(policy), FakeProfile(), SimConfig(**config))


def test_overhead_tables() -> None:
    # Muri's overhead_dict: by gang size (the largest listed size not above the gang), then model.
    assert MURI_SIM.seconds(job(1, gpus=8, model="vgg16")) == 9
    assert MURI_SIM.seconds(job(1, gpus=3, model="a2c")) == 39  # the 2-GPU row
    assert MURI_SIM.seconds(job(1, gpus=64, model="dqn")) == 8  # the 32-GPU row
    assert MURI_SIM.seconds(job(1, model="alexnet")) == 10  # another model: 10 s
    assert MURI_TESTBED.seconds(job(1, model="a2c")) == 59.6
    assert overhead_table("muri-sim") is MURI_SIM
    assert overhead_table("12.5").seconds(job(1)) == 12.5
    with pytest.raises(ValueError, match="muri-testbed"):
        overhead_table("fast")
    with pytest.raises(ValueError):
        OverheadTable("bad", default_s=-1.0)


def test_percentile_by_index_as_the_peers_calc() -> None:
    # calc.py: jct_list.sort(); jct_list[int(cnt*0.99)]
    values = [float(v) for v in range(1, 201)]
    random.Random(1).shuffle(values)
    assert percentile(values, 99, "index") == 199.0  # sorted[int(200 * 0.99)] = sorted[198]
    assert percentile(values, 99) == pytest.approx(198.01)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50, "index") == 3.0
    assert percentile([5.0], 100, "index") == 5.0
    with pytest.raises(ValueError):
        percentile([1.0], 50, "nearest")


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="a round interval of inf needs round_on_events"):
        SimConfig(round_interval_s=math.inf)
    with pytest.raises(ValueError, match="round interval must be a positive number of s, got -1"):
        SimConfig(round_interval_s=-1.0)
    SimConfig(**EVENTS)
    with pytest.raises(ValueError):
        Fidelity(iteration_time_factor=0.0)
    with pytest.raises(ValueError):
        Fidelity(replan="sometimes")
    with pytest.raises(ValueError):
        TiresiasConfig(thresholds=(700.0, 500.0))
    with pytest.raises(ValueError):
        TiresiasConfig(service="gpu_h")
    with pytest.raises(ValueError):
        SchedulerConfig(placement="packed")


def test_iteration_time_factor() -> None:
    # 100 iterations of 1 s x 1.015 = 101.5 s from its start at 0.
    r = run([job(1)], fidelity=Fidelity(iteration_time_factor=1.015), **EVENTS)
    assert ends(r) == {1: pytest.approx(101.5)}


def test_first_start_overhead() -> None:
    # No progress for 10 s after the first start: 100 s of work ends at 110.
    r = run([job(1)], fidelity=Fidelity(first_start=OverheadTable.constant(10.0)), **EVENTS)
    assert ends(r) == {1: pytest.approx(110.0)}


def test_every_round_relaunches_every_running_job() -> None:
    # Muri's simulator: A starts at 0 (5 s start overhead), B arrives at 50 on the other GPU. The
    # round at 50 relaunches A: 45 iterations done, no progress until 55, 55 left -> ends 110.
    # B: 5 s overhead from 50 -> ends 155; its round at 110 (A's end) relaunches it: 55 done at
    # 110, no progress until 115 -> ends 160. A's end needs no round of its own for A.
    five = OverheadTable.constant(5.0)
    fid = Fidelity(first_start=five, relaunch=five, replan="every-round")
    r = run([job(1), job(2, submit=50.0)], gpus=2, fidelity=fid, **EVENTS)
    assert ends(r) == {1: pytest.approx(110.0), 2: pytest.approx(160.0)}
    never = run([job(1), job(2, submit=50.0)], gpus=2, fidelity=Fidelity(first_start=five), **EVENTS)
    assert ends(never) == {1: pytest.approx(105.0), 2: pytest.approx(155.0)}


def test_interrupted_charge_as_muris_simulator() -> None:
    # charge="interrupted": a re-plan takes min(overhead, interval) off the interval it ends, and
    # the interval ending in a completion is free. A (from 0) loses 5 s at B's arrival (50):
    # 45 done, ends at 105 with nothing more to pay. B (from 50) loses 5 s at A's end (105): 50
    # done there, ends 155. (Charged at each launch instead: 110 and 160, above.)
    five = OverheadTable.constant(5.0)
    fid = Fidelity(first_start=five, relaunch=five, replan="every-round", charge="interrupted")
    r = run([job(1), job(2, submit=50.0)], gpus=2, fidelity=fid, **EVENTS)
    assert ends(r) == {1: pytest.approx(105.0), 2: pytest.approx(155.0)}
    # events 3 s apart, within the overhead: those intervals make no progress at all. Job 1 makes
    # none until 6, job 2 none from 3 to 6; from 6 all three run undisturbed and end together at
    # 106 (their last interval free).
    r = run([job(1), job(2, submit=3.0), job(3, submit=6.0)], gpus=3, fidelity=fid, **EVENTS)
    assert ends(r) == {1: pytest.approx(106.0), 2: pytest.approx(106.0), 3: pytest.approx(106.0)}


def test_on_change_relaunches_only_after_a_change() -> None:
    # Muri's testbed: rounds every 100 s; a round re-plans only after an arrival or a completion
    # since the round before. A (300 iterations) starts at 0 (10 s overhead). B arrives at 150
    # on the second GPU: the round at 200 re-plans (B arrived) and relaunches A (190 done, no
    # progress until 210: ends 320); B starts at 200 (10 s) -> 210 + 100 = 310. The round at 100
    # (nothing changed) and at 300 (nothing changed since 200) relaunch nothing.
    ten = OverheadTable.constant(10.0)
    fid = Fidelity(first_start=ten, relaunch=ten, replan="on-change")
    jobs = [job(1, iterations=300), job(2, submit=150.0)]
    r = run(jobs, gpus=2, fidelity=fid, round_interval_s=100.0, restart_cost_s=0.0)
    assert ends(r) == {1: pytest.approx(320.0), 2: pytest.approx(310.0)}


def test_restart_pays_the_restart_cost_and_the_relaunch_overhead() -> None:
    # SRTF on one GPU: L (300 iterations) from 0; S (50 iterations) arrives at 100 and preempts
    # it; S ends at 150; L restarts at 150 and makes no progress for 30 + 5 s: 100 done, 200 left
    # -> ends 385.
    fid = Fidelity(relaunch=OverheadTable.constant(5.0))
    r = run(
        [job(1, iterations=300), job(2, iterations=50, submit=100.0)],
        policy="srtf",
        fidelity=fid,
        round_interval_s=math.inf,
        round_on_events=True,
        restart_cost_s=30.0,
    )
    assert ends(r) == {2: pytest.approx(150.0), 1: pytest.approx(385.0)}


def test_rounds_at_horizon_demote_at_the_threshold() -> None:
    # Tiresias, one GPU, one threshold of 100 GPU-s, guard off. A runs from 0; B arrives at 50
    # (same queue: running A stays ahead). A reaches 100 GPU-s at t = 100: a round there demotes
    # it and B preempts it at once (no periodic round needed).
    tiresias = TiresiasConfig(thresholds=(100.0,), starvation_guard=False)
    jobs = [job(1, iterations=300), job(2, iterations=50, submit=50.0)]
    common = {"scheduler": SchedulerConfig(tiresias=tiresias), **EVENTS}
    r = run(jobs, policy="tiresias", fidelity=Fidelity(rounds_at_horizon=True), **common)
    assert ends(r)[2] == pytest.approx(150.0)
    late = run(jobs, policy="tiresias", **common)  # without: B waits for A's end at 300
    assert ends(late)[2] == pytest.approx(350.0)


def _random(n: int, seed: int) -> list[Job]:
    rng = random.Random(seed)
    models = ["vgg16", "a2c", "bert", "other"]
    return [
        job(
            i,
            gpus=rng.choice([1, 1, 2, 4, 8, 16]),
            iterations=rng.randint(10, 2000),
            iter_time_s=rng.choice([0.5, 1.0, 3.0]),
            submit=rng.random() * 30_000,
            model=rng.choice(models),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "tiresias"])
def test_skipping_changes_nothing_under_every_preset(preset: str, name: str) -> None:
    config = PRESETS[preset].sim_config()
    jobs = _random(120, seed=4)
    cluster = Cluster.uniform(2, 8)
    fast = simulate(jobs, cluster, get_policy(name), FakeProfile(), config)
    slow = simulate(
        jobs,
        cluster,
        get_policy(name),
        FakeProfile(),
        replace(config, skip_idle_rounds=False),
    )
    assert fast.outcomes == slow.outcomes
    assert len(fast.outcomes) == 120
