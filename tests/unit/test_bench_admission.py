"""The Kueue-shaped benchmark's time to admission (benchmarks/admission.py): submission → the
write of the job's first placement (the ``finished_at`` of the round that made it), never the
placement's ``created_at`` (the run's nominal start: before scheduling.service.persist.run_start a
job committed while the round read was placed "before" its submission, and ``bench_kueue.py
--jobs 90`` printed a mean of −1.55 s for its large class; with it, such a job would count 0 s)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import admission  # noqa: E402  # benchmarks/admission.py
import bench_kueue  # noqa: E402  # benchmarks/bench_kueue.py
import kueue_shape as shape  # noqa: E402  # benchmarks/kueue_shape.py

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_admission_is_dated_by_the_round_that_wrote_the_first_placement() -> None:
    """By hand. Round A started at 2.421 s and wrote its placements at 2.600 s; round B 3.811 →
    3.950 s; round C 9.000 → 9.250 s.
    - job 7 (1 GPU, small) submitted at 2.480 s, committed while A read its snapshot, placed by A:
      2.600 − 2.480 = 0.120 s (a row written before run_start, dated A's start: its created_at
      would give 2.421 − 2.480 = −0.059 s);
    - job 8 (5 GPUs, medium) submitted 0.5 s, a gang of two rows by B: 3.950 − 0.5 = 3.450 s;
    - job 9 (20 GPUs, large) submitted 1.0 s, placed by B, preempted, placed again by C (rows in
      any order): its first placement counts, 3.950 − 1.0 = 2.950 s;
    - job 10 (small) never placed: not counted; job 11 (small) placed at 5.0 s by a pruned round
      (the latest round started before, B, finished at 3.950 s): left out and counted;
    - job 12 (small) submitted at 9.100 s, committed while C read its snapshot: its placement is
      dated 9.100 s (its submission, the later of the two), inside C: 9.250 − 9.100 = 0.150 s."""
    jobs = [
        (7, 1, at(2.480)),
        (8, 5, at(0.5)),
        (9, 20, at(1.0)),
        (10, 1, at(3.0)),
        (11, 1, at(4.0)),
        (12, 1, at(9.100)),
    ]
    placements = [
        (9, at(9.000)),
        (7, at(2.421)),
        (8, at(3.811)),
        (8, at(3.811)),
        (9, at(3.811)),
        (11, at(5.0)),
        (12, at(9.100)),
    ]
    rounds = {at(2.421): at(2.600), at(3.811): at(3.950), at(9.000): at(9.250)}
    by_class, undated = admission.admission_s(jobs, placements, rounds, shape.class_of)
    assert undated == 1
    assert by_class.keys() == {"small", "medium", "large"}
    assert by_class["small"] == [pytest.approx(0.120), pytest.approx(0.150)]
    assert by_class["medium"] == [pytest.approx(3.450)]
    assert by_class["large"] == [pytest.approx(2.950)]


def test_a_round_not_yet_finished_leaves_its_jobs_out() -> None:
    by_class, undated = admission.admission_s([(1, 1, at(0))], [(1, at(1))], {at(1): None}, shape.class_of)
    assert (by_class, undated) == ({}, 1)


def test_first_placements_take_the_earliest_row_of_each_job() -> None:
    rows = [(1, at(5)), (2, at(3)), (1, at(2)), (1, at(9))]
    assert admission.first_placements(rows) == {1: at(2), 2: at(3)}


def test_the_replay_lag_is_the_latest_submission_against_the_scenario() -> None:
    """By hand: trace jobs 0, 1, 2 due at 0.1, 0.2, 1.2 s, submitted at 10.0, 10.5, 12.0 s (pks
    100, 101, 102): lags 0, (0.5 − 0.1) = 0.4, (2.0 − 1.1) = 0.9 → 0.9 s. A job the replay did
    not record is ignored."""
    rows = [(100, 1, at(10.0)), (101, 1, at(10.5)), (102, 20, at(12.0)), (103, 1, at(50.0))]
    lag = bench_kueue.replay_lag_s(rows, {100: 0, 101: 1, 102: 2}, {0: 0.1, 1: 0.2, 2: 1.2})
    assert lag == pytest.approx(0.9)
    assert bench_kueue.replay_lag_s([], {}, {}) == 0.0
