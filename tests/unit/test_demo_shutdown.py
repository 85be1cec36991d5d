"""The demo stops its threads within one budget (demo/shutdown.py): stuck threads, each of which
waits out whatever timeout it is given, on a clock the test advances by hand."""

from __future__ import annotations

import pytest

from demo.shutdown import join_within


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class StuckThread:
    """A thread that never ends: its join waits the whole timeout (advancing the clock)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.timeouts: list[float | None] = []

    def join(self, timeout: float | None = None) -> None:
        assert timeout is not None  # never an unbounded wait
        self.timeouts.append(timeout)
        self.clock.now += timeout


class EndedThread(StuckThread):
    def join(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)  # ended: returns at once


def test_three_stuck_threads_take_the_budget_once_not_three_times() -> None:
    clock = Clock()
    threads = [StuckThread(clock) for _ in range(3)]
    join_within(threads, 20.0, clock)
    assert clock.now == pytest.approx(120.0)  # 20 s in all (a timeout each: 60 s)
    assert [t.timeouts for t in threads] == [[20.0], [0.0], [0.0]]


def test_ended_threads_leave_the_budget_to_the_next() -> None:
    clock = Clock()
    ended, stuck = EndedThread(clock), StuckThread(clock)
    clock.now += 3.0  # time passes before the call: the budget counts from the call
    join_within([ended, stuck], 5.0, clock)
    assert ended.timeouts == [5.0] and stuck.timeouts == [5.0]
    assert clock.now == pytest.approx(108.0)


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget_s must be 0 or more, got -1"):
        join_within([], -1.0)
