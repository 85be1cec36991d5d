"""The demo's emulated jobs run at a fixed truth (demo/truth.py), not at the service's belief: the
trace's iteration time at the message's sub-batch, and the truth profile's slowdown beside the
message's partners."""

from __future__ import annotations

import pytest

from agent.messages import PlacementMessage
from demo.options import DemoConfig, DemoError
from demo.truth import EmulatedSpeeds, simulator_learns, truth_profile
from scheduling.core import types as core
from scheduling.profiles import load_default_profile

TRACE = {7: core.Job(7, "team-a", "resnet18", 128, 1, 1000, 0.0, 0.3)}


def message(job_id: int, sub_batch: int = 64, partners: tuple[tuple[str, int], ...] = ()) -> PlacementMessage:
    """The service believes 0.9 s and ξ 1.7 (wrong on purpose)."""
    return PlacementMessage(
        "node-00",
        job_id,
        1,
        "start",
        (0,),
        sub_batch,
        128 // sub_batch,
        128,
        1000,
        0.0,
        0.9,
        1.7,
        None,
        "resnet18",
        partners,
    )


def test_emulated_jobs_run_at_the_trace_speed_and_the_truth_slowdown() -> None:
    shipped = load_default_profile()
    resolved: list[int] = []
    speeds = EmulatedSpeeds(
        shipped, shipped, TRACE, {41: 7}, lambda pk: resolved.append(pk) or (7 if pk == 42 else None)
    )
    job = TRACE[7]
    # the trace's 0.3 s at the full batch, at sub-batch 64 by the shipped samples/s curve
    assert speeds.iter_time_s(message(41)) == shipped.iter_time_s(job, 64)
    assert speeds.slowdown(message(41)) == 1.0  # alone
    partners = (("vgg19", 16), ("resnet50", 32))
    vgg, resnet = (
        core.Job(0, "", "vgg19", 16, 1, 1, 0.0, 1.0),
        core.Job(0, "", "resnet50", 32, 1, 1, 0.0, 1.0),
    )
    worst = max(shipped.slowdown(job, 64, vgg, 16)[0], shipped.slowdown(job, 64, resnet, 32)[0])
    assert speeds.slowdown(message(41, partners=partners)) == worst
    # a placement that arrives before the replay stored the job's id: resolved by its name
    assert speeds.iter_time_s(message(42)) == shipped.iter_time_s(job, 64) and resolved == [42]
    # a job it cannot place runs at its message's speed
    assert (speeds.iter_time_s(message(43)), speeds.slowdown(message(43))) == (0.9, 1.7)


def test_the_truth_error_is_checked() -> None:
    shipped = load_default_profile()
    assert truth_profile(shipped, DemoConfig()) is shipped
    with pytest.raises(DemoError, match=r"--truth-error must be in \[0, 1\)"):
        truth_profile(shipped, DemoConfig(truth_error=1.5))
    if not simulator_learns():
        with pytest.raises(DemoError, match="needs the simulator's belief vs truth"):
            truth_profile(shipped, DemoConfig(truth_error=0.3))
    else:
        truth = truth_profile(shipped, DemoConfig(truth_error=0.3, seed=4))
        job = TRACE[7]
        partner = core.Job(0, "", "vgg19", 16, 1, 1, 0.0, 1.0)
        xi, shipped_xi = truth.slowdown(job, 128, partner, 16)[0], shipped.slowdown(job, 128, partner, 16)[0]
        assert max(1.0, 0.7 * shipped_xi) <= xi <= 1.3 * shipped_xi  # off by at most ±30 %
