"""A re-plan that relaunches every running job, as one loop (pure Python).

Under the peers' model (``Fidelity.replan="every-round"``, Muri's simulator) every event is a
round that relaunches every running job, so this loop runs once per round over all of them; it
is most of a round's cost there. Per job it does what the simulator's three steps do one call
each — bring the counters up to the instant (``Simulator._advance`` without a usage ledger), charge
the relaunch overhead (:meth:`~scheduling.sim.fidelity.Fidelity.relaunch_job`), file the
completion event at the unchanged rate — with the same float operations in the same order, so
that the results are bit for bit those of the three calls (``tests/unit/test_sim_fast_paths.py``
compares the two). ``max``/``min`` of two floats are written as comparisons returning the same
operand the builtins return.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.core.types import RunningJob
from scheduling.sim.fidelity import OverheadTable
from scheduling.sim.job_state import JobState, running_view

#: A completion event of the simulator's heap: (end s, sequence number, job id, job version).
Event = tuple[float, int, int, int]


def relaunch_all(
    running: Iterable[JobState],
    now: float,
    overheads: OverheadTable,
    interrupted: bool,
    seq: int,
    xi_totals: tuple[float, float],
    views: dict[int, RunningJob] | None = None,
) -> tuple[list[Event], int, tuple[float, float]]:
    """Relaunch every job of ``running`` (all running, none with a usage ledger or a belief) at
    ``now`` (s, not before any job's last update).

    Each job's progress, attained and charged GPU-s and shared time are brought up to ``now``;
    its overhead from ``overheads`` is charged (``interrupted``: it loses ``min(overhead, now −
    mark)`` s of progress, never below its progress at the mark; else no progress until ``now +
    overhead``); its version is bumped and a completion event filed with the next sequence
    numbers after ``seq``. ``xi_totals``: the simulator's running sums (``ξ``-weighted shared
    time, shared time), added to in job order. ``views``: filled with each job's view at
    ``now`` (job id → :func:`~scheduling.sim.job_state.running_view`), in job order: after the
    relaunch its counters are at ``now`` (``last = now``, no progress still to add), so the view
    is what the simulator's snapshot would build at ``now``. Returns the events (in job order),
    the last sequence number and the new sums.
    """
    memo = overheads.memo
    xi_weighted, xi_time = xi_totals
    events: list[Event] = []
    append = events.append
    for s in running:
        base = s.base
        rate = s.rate
        last = s.last
        dt = now - last
        if dt > 0:  # Simulator._advance, no ledger
            gpus = base.gpus
            charge_rate = s.charge_rate
            s.attained += gpus * dt
            s.charged += charge_rate * dt
            xi = s.xi
            if xi != 1.0 or charge_rate != gpus:
                s.shared_s += dt
                xi_weighted += xi * dt
                xi_time += dt
            resume_at = s.resume_at
            t0 = resume_at if resume_at > last else last
            if now > t0:
                s.done += rate * (now - t0)
            s.last = now
        overhead = memo.get((base.model, base.gpus))
        if overhead is None:
            overhead = overheads.seconds(base)
        if interrupted:  # Fidelity.relaunch_job
            since = now - s.mark
            lost = s.done - (since if since < overhead else overhead) * rate
            mark_done = s.mark_done
            done = lost if lost > mark_done else mark_done
            s.done = done
            s.mark = now
            s.mark_done = done
        else:
            until = now + overhead
            if until > s.resume_at:
                s.resume_at = until
            done = s.done
        s.version += 1  # Simulator._repush
        remaining = base.iterations - done
        resume_at = s.resume_at
        t_start = resume_at if resume_at > now else now
        seq += 1
        append((t_start + (remaining / rate if remaining > 0 else 0.0), seq, base.id, s.version))
        if views is not None:
            placement = s.placement
            assert placement is not None
            views[base.id] = running_view(base, done, s.attained, s.queued_since, placement)
    return events, seq, (xi_weighted, xi_time)
