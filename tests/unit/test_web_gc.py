"""The web worker's garbage collector (config/web_gc.py): no automatic full collection, one run
between requests when due, and gunicorn's hooks wired to it."""

from __future__ import annotations

import gc
import runpy
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from config import web_gc

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The generations of the collections that start while the test runs; the process's
    thresholds restored after, and nothing frozen (``gc.freeze`` is replaced for the test)."""
    saved = gc.get_threshold()
    monkeypatch.setattr(gc, "freeze", lambda: None)
    generations: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield generations
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*saved)


def survivors() -> list[list[object]]:
    """Self-referencing lists that stay alive, more than a quarter of what the collector tracks
    (however much the test process holds by then): each young collection moves them on, so
    CPython's rule (survivors past a quarter of the oldest generation) calls for full ones."""
    kept: list[list[object]] = []
    for _ in range(len(gc.get_objects()) // 3 + 100_000):
        cell: list[object] = []
        cell.append(cell)
        kept.append(cell)
    return kept


def test_default_collector_runs_full_collections_among_such_allocations(collector_state: list[int]) -> None:
    """The premise: with CPython's thresholds, these allocations start full collections (so the
    next test's "none" says something)."""
    gc.collect()
    gc.set_threshold(700, 10, 10)
    collector_state.clear()
    kept = survivors()
    assert 2 in collector_state
    del kept


def test_after_start_keeps_young_collections_and_stops_automatic_full_ones(
    collector_state: list[int],
) -> None:
    gc.set_threshold(700, 10, 10)
    web_gc.after_start()
    assert gc.get_threshold() == (700, 10, web_gc.NEVER)
    collector_state.clear()
    kept = survivors()
    assert 0 in collector_state and 1 in collector_state
    assert 2 not in collector_state
    del kept


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_gc(monkeypatch: pytest.MonkeyPatch, young_collections: int) -> list[int]:
    """``web_gc``'s view of the collector: ``get_count()[2] == young_collections``; returns the
    list that records each ``collect()``."""
    runs: list[int] = []
    fake = SimpleNamespace(get_count=lambda: (0, 0, young_collections), collect=lambda: runs.append(1) or 0)
    monkeypatch.setattr(web_gc, "gc", fake)
    return runs


def test_a_full_collection_runs_when_due_and_at_most_once_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = fake_gc(monkeypatch, web_gc.YOUNG_COLLECTIONS)
    clock = Clock()
    collect = web_gc.FullCollections(clock, min_interval_s=10.0)
    assert collect() is True and len(runs) == 1 and collect.last_s == 1000.0
    clock.now = 1009.9
    assert collect() is False and len(runs) == 1
    clock.now = 1010.0
    assert collect() is True and len(runs) == 2


def test_no_full_collection_before_cpython_would_consider_one(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = fake_gc(monkeypatch, web_gc.YOUNG_COLLECTIONS - 1)
    collect = web_gc.FullCollections(Clock(), min_interval_s=0.0)
    assert collect() is False and runs == []


def test_a_thread_finding_another_collecting_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    collect = web_gc.FullCollections(Clock(), min_interval_s=0.0)
    inner: list[bool] = []
    fake = SimpleNamespace(
        get_count=lambda: (0, 0, web_gc.YOUNG_COLLECTIONS), collect=lambda: inner.append(collect())
    )
    monkeypatch.setattr(web_gc, "gc", fake)
    assert collect() is True
    assert inner == [False]  # the call made while the first one collects does not collect again


def test_gunicorn_hooks_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(web_gc, "after_start", lambda: calls.append("start"))
    monkeypatch.setattr(web_gc, "collect_between_requests", lambda: calls.append("request") or False)
    hooks = runpy.run_path(str(REPO / "gunicorn.conf.py"))
    hooks["post_worker_init"](None)
    hooks["post_request"](None, None, {}, None)
    assert calls == ["start", "request"]
