"""The open part's charge kept per GPU (scheduling/service/open_charge.py) is the charge of all its
rows at once (the core's ``charge_segments`` of ``intervals_of``), to the last bit, after random
changes of the kinds a round makes (a job placed, one ended, a slowdown measured, a partner
noted, a row deleted), and only the GPUs whose rows or pairs' slowdowns changed are charged
again. Pure: no database."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from scheduling.core.cumulative import Cumulative
from scheduling.core.usage import charge_segments
from scheduling.service.gpu_hours import intervals_of
from scheduling.service.open_charge import open_curves

Row = tuple[Any, ...]  # (id, job, tenant, gpu, begin_s, end_s | None, partner, measured ξ, predicted ξ)


def from_scratch(rows: list[Row]) -> dict[int, Cumulative]:
    """Every row charged at once, as the open part was before it was kept per GPU."""
    per_tenant: dict[int, list[tuple[float, float, float]]] = {}
    for seg in charge_segments(*intervals_of([r[1:] for r in rows], math.inf)):
        per_tenant.setdefault(int(seg.tenant), []).append((seg.start_s, seg.end_s, seg.rate))
    return {t: Cumulative(segs) for t, segs in per_tenant.items()}


def same(got: dict[int, Cumulative], want: dict[int, Cumulative]) -> None:
    assert list(got) == list(want)
    for t, curve in want.items():
        assert (got[t].times, got[t].values, got[t].slopes) == (curve.times, curve.values, curve.slopes)


def tenant_of(job: int) -> int:
    return 1 + job % 3


def random_rows(rng: random.Random, gpus: int, jobs: int) -> list[Row]:
    """Per GPU two lanes of back-to-back rows (so at most two jobs at once), jobs drawn from a
    small pool (a job on several GPUs, a pair sharing several), times on a 0.5 s grid (ties)."""
    rows: list[Row] = []
    for gpu in range(gpus):
        for _lane in range(rng.choice((1, 2, 2))):
            t = rng.choice((0.0, 0.5, 3.0))
            for _ in range(rng.randint(1, 3)):
                job = rng.randrange(jobs)
                end = t + rng.choice((0.0, 0.5, 2.0, 7.5, 10.0))
                rows.append(_row(len(rows) + 1, job, gpu, t, end))
                t = end + rng.choice((0.0, 0.0, 1.5))
            if rng.random() < 0.6:  # the lane's last row still open
                rows[-1] = (*rows[-1][:5], None, *rows[-1][6:])
    return _paired(rng, rows)


def _row(row_id: int, job: int, gpu: int, begin: float, end: float | None) -> Row:
    return (row_id, job, tenant_of(job), gpu, begin, end, None, None, None)


def _paired(rng: random.Random, rows: list[Row]) -> list[Row]:
    """A partner and slowdowns noted on some of the rows that overlap another job on their GPU."""
    out = []
    for r in rows:
        others = [o[1] for o in rows if o[3] == r[3] and o[1] != r[1] and _overlap(o, r)]
        if others and rng.random() < 0.8:
            measured = rng.choice((None, 1.25, 1.5, 2.0))
            predicted = rng.choice((None, 1.1, 1.3))
            r = (*r[:6], rng.choice(others), measured, predicted)
        out.append(r)
    return sorted(out, key=lambda r: (r[4], r[0]))


def _overlap(a: Row, b: Row) -> bool:
    a_end = math.inf if a[5] is None else a[5]
    b_end = math.inf if b[5] is None else b[5]
    return a[4] < b_end and b[4] < a_end


def changed(rng: random.Random, rows: list[Row], jobs: int, now: float) -> tuple[list[Row], set[int]]:
    """One change a round could make, and the GPUs whose own rows it touched."""
    rows = list(rows)
    kind = rng.choice(("end", "place", "slowdown", "partner", "delete"))
    open_rows = [k for k, r in enumerate(rows) if r[5] is None]
    if kind == "end" and open_rows:
        k = rng.choice(open_rows)
        rows[k] = (*rows[k][:5], now, *rows[k][6:])
    elif kind == "place" or not rows:
        job, gpu = rng.randrange(jobs), rng.randrange(6)
        rows.append(_row(max((r[0] for r in rows), default=0) + 1, job, gpu, now, None))
        k = len(rows) - 1
    elif kind in ("slowdown", "partner"):
        k = rng.randrange(len(rows))
        r = rows[k]
        if kind == "slowdown":
            rows[k] = (*r[:7], rng.choice((1.2, 1.7, 2.5)), r[8])
        else:
            rows[k] = (*r[:6], rng.randrange(jobs), r[7], rng.choice((None, 1.4)))
    else:
        k = rng.randrange(len(rows))
    touched = {rows[k][3]}
    if kind == "delete" and rows:
        del rows[k]
    return sorted(rows, key=lambda r: (r[4], r[0])), touched


@pytest.mark.parametrize("seed", range(40))
def test_kept_per_gpu_equals_all_rows_at_once_over_random_changes(seed: int) -> None:
    rng = random.Random(seed)
    rows = random_rows(rng, gpus=6, jobs=8)
    curves, parts = open_curves(rows, {})
    same(curves, from_scratch(rows))
    now = 40.0
    for _ in range(25):
        candidate, touched = changed(rng, rows, 8, now)
        now += rng.choice((0.0, 0.5, 3.0))
        try:
            want = from_scratch(candidate)
        except ValueError:  # three jobs at once on a GPU: refused alike, the change dropped
            with pytest.raises(ValueError, match="one or two jobs"):
                open_curves(candidate, parts)
            continue
        rows = candidate
        got, new_parts = open_curves(rows, parts)
        same(got, want)
        same(open_curves(rows, {})[0], want)
        # a GPU none of whose rows changed, whose jobs' pairs noted the same slowdowns, is the
        # part kept, not charged again
        for gpu, part in new_parts.items():
            if gpu not in touched and gpu in parts and parts[gpu].fingerprint == part.fingerprint:
                assert part is parts[gpu]
        parts = new_parts


def test_a_slowdown_noted_on_one_gpu_re_splits_the_pair_on_another() -> None:
    # jobs 1 and 2 share GPUs 0 and 1 from 0 s; on GPU 1 a row of job 2 alone later; then job 1
    # reports ξ = 3 beside 2 on GPU 0 and job 2 ξ = 1 beside 1: GPU 1's split changes too
    rows = [
        (1, 1, 1, 0, 0.0, None, 2, None, None),
        (2, 2, 2, 0, 0.0, None, 1, None, None),
        (3, 1, 1, 1, 0.0, None, 2, None, None),
        (4, 2, 2, 1, 0.0, None, 1, None, None),
    ]
    even, parts = open_curves(rows, {})
    # even split on both GPUs: each tenant 0.5 + 0.5 GPU-s per second
    assert even[1].bins(0.0, 10.0, 1) == [10.0] and even[2].bins(0.0, 10.0, 1) == [10.0]
    rows[0] = (1, 1, 1, 0, 0.0, None, 2, 3.0, None)
    rows[1] = (2, 2, 2, 0, 0.0, None, 1, 1.0, None)
    split, new_parts = open_curves(rows, parts)
    # job 1 (ξ 3) is charged ξ_2 / (ξ_1 + ξ_2) = 1/4 of each GPU, job 2 3/4: 2 × 10 s × 1/4 = 5 GPU-s
    assert split[1].bins(0.0, 10.0, 1) == [5.0] and split[2].bins(0.0, 10.0, 1) == [15.0]
    assert new_parts[1] is not parts[1]  # GPU 1's rows did not change, its pair's slowdown did
    same(split, from_scratch(rows))
