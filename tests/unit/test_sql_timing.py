"""The per-window statement timing of the Kueue-shaped benchmark (benchmarks/sql_timing.py):
one entry per statement whatever the length of its placeholder lists, calls and time added to
the window they started in, and a statement's time per call in each window reported."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sql_timing  # noqa: E402  # benchmarks/sql_timing.py


def test_placeholder_lists_of_any_length_are_one_statement() -> None:
    two = sql_timing.statement_key('SELECT 1 FROM "t" WHERE "id" IN (%s, %s)')
    three = sql_timing.statement_key('SELECT 1 FROM "t" WHERE "id" IN (%s, %s, %s)')
    assert two == three == 'SELECT 1 FROM "t" WHERE "id" IN (%s, …)'
    assert sql_timing.statement_key('UPDATE "t" SET "a" = %s WHERE "id" = %s') == (
        'UPDATE "t" SET "a" = %s WHERE "id" = %s'  # single placeholders are kept
    )


def test_calls_are_counted_in_the_window_they_started_in(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"mono": 100.0, "perf": 0.0}
    monkeypatch.setattr(sql_timing.time, "monotonic", lambda: clock["mono"])
    monkeypatch.setattr(sql_timing.time, "perf_counter", lambda: clock["perf"])
    timing = sql_timing.SqlTiming(window_s=10.0)  # windows from monotonic 100 s

    def execute(spent_s: float) -> Any:
        def run(sql: str, params: Any, many: bool, context: dict) -> str:
            clock["perf"] += spent_s
            return "rows"

        return run

    for at, spent in ((101.0, 0.002), (109.0, 0.004), (112.0, 0.030)):
        clock["mono"] = at
        assert timing.wrapper(execute(spent), "SELECT %s, %s", None, False, {}) == "rows"
    cells = timing.calls["SELECT %s, …"]
    assert cells[0] == [2, pytest.approx(0.006)]  # 101 s and 109 s: window 0
    assert cells[1] == [1, pytest.approx(0.030)]  # 112 s: window 1
    # 3 ms a call in the first window, 30 ms in the second
    assert "3 30" in timing.report(top=1)


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_s must be positive"):
        sql_timing.SqlTiming(window_s=0)
