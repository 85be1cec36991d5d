"""The cross-check of docs/FIDELITY.md §3: our baselines under each peer's preset against the
peers' published numbers, on the public traces (skipped without ../shared/data).

References (public data, never our own output):

- Muri's simulator: the values its authors plotted in Figures 9–10 (Rivendile/Muri,
  ``simulator/draw_fig9-10.py``, ``SRTF_*_raw`` and ``Tiresias_L_*_raw``, traces 1, 3, 4),
  which its simulator reproduces exactly (``benchmarks/peer_bench.py``);
- Muri's testbed: ``cluster_exp/results/{SRTF,tiresias}/result.out`` (400 jobs, 8 × 8 V100);
- Tiresias' simulator (SymbioticLab/Tiresias, ``run_sim.py --schedule=fifo --scheme=yarn``) on
  the same traces, run as ``benchmarks/peer_bench.py --tiresias`` does (durations
  ``iterations × iteration_time``).

Targets (issue 15): SRTF and Tiresias within ±2 % of Muri's simulator (average JCT, p99,
makespan), within ±5 % of the measured testbed; FIFO with consolidated placement within ±1 %.
Under the matching preset Muri's simulator and Tiresias' FIFO are reproduced to within 0.01 %,
so those checks allow 0.1 %.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduling.core.metrics import jct_summary, makespan
from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, SchedulerConfig
from scheduling.profiles import load_default_profile
from scheduling.sim.engine import SimConfig, simulate
from scheduling.sim.fidelity import Fidelity
from scheduling.sim.loaders import load_traces
from scheduling.sim.presets import PRESETS

pytestmark = pytest.mark.shared_data

# (avg JCT s, p99 JCT s, makespan s): draw_fig9-10.py, indices 0 (trace1), 4 (trace3), 6 (trace4)
MURI_SIM = {
    ("srtf", 1): (1_370_603.198, 16_647_148.09074, 26_045_465.532945),
    ("srtf", 3): (193_081.796, 4_538_890.607, 8_174_135.28),
    ("srtf", 4): (581_982.9002, 7_768_533.005, 14_787_990.59235),
    ("tiresias", 1): (3_330_371.307, 14_739_851.5052, 23_556_410.217355),
    ("tiresias", 3): (347_213.2481, 4_983_397.254, 8_174_226.28),
    ("tiresias", 4): (1_319_382.936, 8_663_311.856, 13_073_838.61827),
}
# cluster_exp/results/<run>/result.out
MURI_TESTBED = {
    "srtf": (249_140.176953, 2_723_588.792933, 4_156_633.262890),
    "tiresias": (336_533.171665, 2_812_808.288529, 3_959_796.871355),
}
# Tiresias' simulator, fifo on yarn (ms in its logs, here s)
TIRESIAS_FIFO = {
    1: (11_184_821.541338688, 14_962_886.706, 24_829_065.374),
    3: (991_200.365350806, 1_696_697.939, 8_171_960.802),
    4: (4_076_834.637920015, 6_449_312.203, 12_567_653.258),
}


def ours(shared_data: Path, trace: str, policy: str, config: SimConfig) -> tuple[float, float, float]:
    jobs = load_traces(shared_data / "traces" / trace).jobs
    result = simulate(jobs, Cluster.uniform(8, 8), get_policy(policy), load_default_profile(), config)
    assert not result.unfinished
    summary = jct_summary(result.outcomes, config.fidelity.percentile)
    return summary["avg_jct_s"], summary["p99_jct_s"], makespan(result.outcomes)


def assert_within(got: tuple[float, ...], want: tuple[float, ...], tolerance: float) -> None:
    ratios = [g / w for g, w in zip(got, want, strict=True)]
    assert all(abs(r - 1) <= tolerance for r in ratios), f"ratios (avg, p99, makespan) {ratios}"


@pytest.mark.parametrize("policy", ["srtf", "tiresias"])
def test_muri_sim_trace3(shared_data: Path, policy: str) -> None:
    config = PRESETS["muri-sim"].sim_config()
    assert_within(ours(shared_data, "muri-sim-trace3.csv", policy, config), MURI_SIM[(policy, 3)], 0.001)


@pytest.mark.slow
@pytest.mark.parametrize("trace", [1, 4])
@pytest.mark.parametrize("policy", ["srtf", "tiresias"])
def test_muri_sim_trace1_and_4(shared_data: Path, policy: str, trace: int) -> None:
    config = PRESETS["muri-sim"].sim_config()
    got = ours(shared_data, f"muri-sim-trace{trace}.csv", policy, config)
    assert_within(got, MURI_SIM[(policy, trace)], 0.001)


@pytest.mark.parametrize("policy", ["srtf", "tiresias"])
def test_muri_testbed(shared_data: Path, policy: str) -> None:
    config = PRESETS["muri-testbed"].sim_config()
    assert_within(ours(shared_data, "muri-testbed-400.csv", policy, config), MURI_TESTBED[policy], 0.05)


@pytest.mark.parametrize("trace", [1, 3, 4])
def test_fifo_consolidated_against_tiresias_simulator(shared_data: Path, trace: int) -> None:
    # Tiresias' fifo: a pass at each arrival and completion, no overheads, yarn placement.
    config = SimConfig(
        round_interval_s=math.inf,
        round_on_events=True,
        scheduler=SchedulerConfig(placement="consolidated"),
        fidelity=Fidelity(percentile="index"),
    )
    got = ours(shared_data, f"muri-sim-trace{trace}.csv", "fifo", config)
    assert_within(got, TIRESIAS_FIFO[trace], 0.001)
    spread = SimConfig(round_interval_s=math.inf, round_on_events=True, fidelity=Fidelity(percentile="index"))
    if trace != 3:  # spreading never blocks on fragmentation: about 7-8 % optimistic there
        assert (
            ours(shared_data, f"muri-sim-trace{trace}.csv", "fifo", spread)[0]
            < 0.95 * TIRESIAS_FIFO[trace][0]
        )
