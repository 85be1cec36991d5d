"""Windowed, normalised GPU-hours (scheduling.core.usage) with hand-computed values."""

from __future__ import annotations

import math
import random

import pytest

from scheduling.core.usage import (
    ChargeSegment,
    Interval,
    UsageLedger,
    active_tenants,
    active_tenants_over,
    charge_segments,
    gpu_hours_between,
    window_fairness,
)


def test_a_shared_gpu_is_split_by_normalised_progress_only_while_shared():
    # job 1 (A) holds GPU 0 for 0–3600 s; job 2 (B) shares it 1800–3600 s with ξ_1 = 1, ξ_2 = 3:
    # 1 pays ξ_2/(ξ_1+ξ_2) = 3/4 while shared, 2 pays 1/4
    intervals = [Interval(1, "A", (0,), 0.0, 3600.0), Interval(2, "B", (0,), 1800.0, 3600.0)]
    xi = {(1, 2): 1.0, (2, 1): 3.0}
    segments = charge_segments(intervals, lambda a, b: xi[(a, b)])
    hours = gpu_hours_between(segments, 0.0, 3600.0)
    assert hours["A"] == pytest.approx(0.5 + 0.5 * 0.75)
    assert hours["B"] == pytest.approx(0.5 * 0.25)
    assert sum(hours.values()) == pytest.approx(1.0)  # one busy GPU-hour


def test_the_last_window_counts_only_its_part_of_a_segment():
    segments = [ChargeSegment("A", 0.0, 7200.0, 2.0)]  # 2 GPUs for 2 h
    assert gpu_hours_between(segments, 3600.0, 10_800.0) == {"A": 2.0}
    assert gpu_hours_between(segments, 7200.0, 9000.0) == {}


def test_a_placement_that_ends_before_it_starts_charges_nothing():
    assert charge_segments([Interval(1, "A", (0,), 100.0, 50.0)], lambda a, b: 1.0) == []


def test_a_window_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="must not end before"):
        gpu_hours_between([], 10.0, 0.0)


def test_three_jobs_on_one_gpu_are_refused():
    intervals = [Interval(j, "A", (0,), 0.0, 10.0) for j in (1, 2, 3)]
    with pytest.raises(ValueError, match="one or two jobs"):
        charge_segments(intervals, lambda a, b: 1.0)


def test_ledger_spreads_a_charge_over_bins_and_slides_windows():
    ledger = UsageLedger(bin_s=3600.0)
    ledger.charge("A", 1800.0, 9000.0, 1.0)  # 0.5 h in bin 0, 1 h in bin 1, 0.5 h in bin 2
    ledger.charge("B", 0.0, 10_800.0, 0.5)  # 0.5 GPU for 3 h
    windows = ledger.windows(7200.0, end_s=10_800.0)
    assert [(w.start_s, w.end_s) for w in windows] == [(0.0, 7200.0), (3600.0, 10_800.0)]
    assert windows[0].gpu_hours == pytest.approx({"A": 1.5, "B": 1.0})
    assert windows[1].gpu_hours == pytest.approx({"A": 1.5, "B": 1.0})


def test_a_run_shorter_than_a_window_is_one_window():
    ledger = UsageLedger(bin_s=600.0)
    ledger.charge("A", 0.0, 1200.0, 1.0)
    (only,) = ledger.windows(7200.0, end_s=1200.0)
    assert (only.start_s, only.end_s) == (0.0, 1200.0)
    assert only.gpu_hours == pytest.approx({"A": 1200.0 / 3600.0})


def test_ledger_refuses_a_bad_bin_width():
    with pytest.raises(ValueError, match="bin width"):
        UsageLedger(bin_s=0.0)


def test_window_fairness_of_shares_of_the_guarantee():
    # A used 8 GPU-h of a 4-GPU guarantee, B 4 GPU-h of a 2-GPU guarantee: equal shares
    assert window_fairness({"A": 8.0, "B": 4.0}, {"A": 4, "B": 2}) == (1.0, 1.0)
    # 22 vs 9 GPU-h with equal guarantees: Jain (31²)/(2·(22²+9²)) = 961/1130
    jain, ratio = window_fairness({"A": 22.0, "B": 9.0}, {"A": 4, "B": 4})
    assert jain == pytest.approx(961 / 1130)
    assert ratio == pytest.approx(22 / 9)
    assert window_fairness({"A": 1.0}, {"A": 1, "B": 1})[1] == math.inf
    assert math.isnan(window_fairness({}, {"A": 0})[0])


def test_active_tenants_need_work_for_half_the_window():
    # in [0, 7200]: A 7200 s; B 2200 s; C's union 4000 s (overlaps counted once); D's union 3500 s
    spans = [("A", 0.0, 7200.0), ("B", 5000.0, 9000.0)]
    spans += [("C", 0.0, 1000.0), ("C", 500.0, 2000.0), ("C", 2000.0, 4000.0)]
    spans += [("D", 0.0, 3000.0), ("D", 1000.0, 3500.0)]
    assert active_tenants(spans, 0.0, 7200.0) == {"A", "C"}


def test_active_tenants_over_several_windows_at_once():
    # now = 10,000 s; windows 2,000 s (need 1,000 s) and 8,000 s (need 4,000 s). A: one job
    # 9,500 → now (500 s): in neither. B: 5,000 → 9,400 and 9,000 → now, overlapping: union
    # 2,000 s in the short window, 5,000 s in the long one: in both. C: 1,000 → 3,000 and
    # 3,000 → 4,500 (touching), 8,800 → 9,900: 1,100 s in the short window (≥ 1,000), in the
    # long one 1,000 + 1,500 + 1,100 = 3,600 s (< 4,000): only in the short one
    spans = [("A", 9500.0, 10_000.0), ("B", 5000.0, 9400.0), ("B", 9000.0, 10_000.0)]
    spans += [("C", 1000.0, 3000.0), ("C", 3000.0, 4500.0), ("C", 8800.0, 9900.0)]
    assert active_tenants_over(spans, 10_000.0, (2000.0, 8000.0)) == [{"B", "C"}, {"B"}]
    assert active_tenants_over(spans, 10_000.0, ()) == []


def test_active_tenants_over_windows_is_active_tenants_of_each():
    rng = random.Random(7)
    for _ in range(300):
        spans = []
        for _ in range(rng.randint(0, 25)):
            a = rng.choice([rng.uniform(-500.0, 1000.0), float(rng.randint(-5, 10) * 100)])
            spans.append((rng.choice("ABC"), a, a + rng.choice([rng.uniform(0.0, 600.0), 100.0, 0.0])))
        windows = rng.sample([50.0, 200.0, 400.0, 700.0, 1000.0, 1500.0], rng.randint(1, 4))
        expected = [active_tenants(spans, 1000.0 - w, 1000.0) for w in windows]
        assert active_tenants_over(spans, 1000.0, windows) == expected


def _charge_by_brute_force(intervals, xi, lo_s, hi_s):
    """Tenant → GPU-seconds in ``[lo_s, hi_s]``, cut at every change point of the whole cluster
    (the definition, without the per-GPU sweep): between two change points each GPU's holders
    are fixed and share it by ``ξ_b / (ξ_a + ξ_b)``."""
    times = sorted({t for iv in intervals for t in (iv.start_s, iv.end_s)} | {lo_s, hi_s})
    used: dict[str, float] = {}
    for a, b in zip(times, times[1:], strict=False):
        a, b = max(a, lo_s), min(b, hi_s)
        if b <= a:
            continue
        holders: dict[int, list[Interval]] = {}
        for iv in intervals:
            if iv.start_s <= a and iv.end_s >= b:
                for g in iv.gpu_ids:
                    holders.setdefault(g, []).append(iv)
        for on in holders.values():
            if len(on) == 1:
                used[on[0].tenant] = used.get(on[0].tenant, 0.0) + (b - a)
            else:
                p, q = on
                xp, xq = xi(p.job_id, q.job_id), xi(q.job_id, p.job_id)
                used[p.tenant] = used.get(p.tenant, 0.0) + (b - a) * xq / (xp + xq)
                used[q.tenant] = used.get(q.tenant, 0.0) + (b - a) * xp / (xp + xq)
    return used


def test_the_per_gpu_sweep_charges_what_the_cluster_wide_cut_does():
    # random single-GPU placements and gangs, at most two jobs per GPU at once (slot 0 and 1)
    rng = random.Random(7)
    for _ in range(30):
        intervals: list[Interval] = []
        job = 0
        for gpu_set in [(0,), (1,), (2, 3), (4,), (5, 6, 7)]:
            for _slot in range(2):
                t = rng.uniform(0, 50)
                while t < 1000:
                    job += 1
                    length = rng.uniform(1, 300)
                    intervals.append(Interval(job, rng.choice("AB"), gpu_set, t, t + length))
                    t += length + rng.uniform(0, 40)
        slowdown = {j: rng.uniform(1.0, 3.0) for j in range(job + 1)}

        def xi(a, b, slowdown=slowdown):
            return slowdown[a]

        hours = gpu_hours_between(charge_segments(intervals, xi), 100.0, 900.0)
        expected = _charge_by_brute_force(intervals, xi, 100.0, 900.0)
        assert hours == pytest.approx({t: s / 3600.0 for t, s in sorted(expected.items())})


def test_a_gang_alone_on_its_gpus_is_one_segment_of_its_gpu_count():
    segments = charge_segments([Interval(1, "A", (0, 1, 2, 3), 0.0, 100.0)], lambda a, b: 1.0)
    assert segments == [ChargeSegment("A", 0.0, 100.0, 4.0)]
