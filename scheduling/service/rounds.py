"""One scheduling round: lease, snapshot, policy, persist, then dispatch after commit
(ARCHITECTURE.md, "Data flow of a round").

1. :class:`~scheduling.service.lease.RoundLease`: only one round at a time.
2. :func:`~scheduling.service.snapshot.load_state`: the database as the core's snapshot, read
   as one view (:func:`~scheduling.service.snapshot.consistent_view`).
3. The configured policy (setting ``SHAREWISE_POLICY``) decides.
4. :func:`~scheduling.service.persist.persist_round` writes, in one (second) transaction, the placements,
   the jobs' status, their events (only for the jobs that start or stop) and the
   :class:`~scheduling.models.Round` record with every decision and its reason (the waits
   packed, :mod:`scheduling.round_waits`).
5. After commit, the messages go to the dispatcher (:mod:`scheduling.service.dispatch`).

Units: milliseconds (ms) for the phases, seconds (s) elsewhere.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.core import types as core
from scheduling.core.policies import get_policy
from scheduling.models import Round
from scheduling.round_waits import pack_waits
from scheduling.service.dispatch import Message, get_dispatcher
from scheduling.service.knowledge import learned_profile
from scheduling.service.lease import RoundLease
from scheduling.service.persist import persist_round
from scheduling.service.snapshot import consistent_view, load_state
from scheduling.service.waiting import carry_estimates, estimates_for

log = logging.getLogger(__name__)

_policies: dict[str, core.Policy] = {}


def policy_named(name: str | None = None) -> core.Policy:
    """The policy object for ``name`` (default: setting ``SHAREWISE_POLICY``),
    kept between rounds so its pure caches are reused. Raises ``UnknownPolicyError``."""
    name = name or settings.SHAREWISE_POLICY
    policy = _policies.get(name)
    if policy is None:
        policy = _policies[name] = get_policy(name)
    return policy


def run_round(
    now: datetime | None = None,
    policy: str | core.Policy | None = None,
    profile: core.Profile | None = None,
    lease_wait_s: float = 0.0,
) -> Round | None:
    """Run one scheduling round; ``None`` when another round holds the lease.

    Takes the :class:`RoundLease` (waiting up to ``lease_wait_s`` seconds while another holder,
    e.g. a partner update, has it; 0: skip at once), reads the snapshot, asks the policy
    (``policy``: a name or an object; default setting ``SHAREWISE_POLICY``), then in one
    transaction writes placements, job status, events and the :class:`~scheduling.models.Round`;
    messages are dispatched after commit. A round that changes nothing and decides exactly what
    the last recorded round decided is not stored again: the returned ``Round`` is then unsaved
    (``pk`` is ``None``), and it writes no row at all (besides the lease's) unless its estimated
    starts moved.
    ``round.phases_ms`` gives the time of each phase (ms): ``snapshot``, ``policy``, ``persist``
    (stored with the record), then ``commit`` and ``dispatch`` (on the returned object only).
    Raises ``UnknownPolicyError`` for an unknown policy name; a database error rolls the whole
    round back (nothing of it is written) and propagates.
    """
    chosen = policy if policy is not None and not isinstance(policy, str) else policy_named(policy)
    profile = profile or learned_profile()
    lease = RoundLease()
    if not lease.acquire_within(lease_wait_s):
        log.info("round skipped: another round holds the lease")
        return None
    try:
        with collector_paused():
            return _locked_round(now or timezone.now(), chosen, profile)
    finally:
        lease.release()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back on after (unless it was off).

    A round at 10,000 pending jobs allocates a few hundred thousand objects (rows, core jobs,
    decisions), which triggers full collections of the whole heap in the middle of the round:
    on a 2-core machine the snapshot took 90–230 ms depending on whether one fell in it, 90–110
    ms without. What a round allocates is freed by reference counting as it goes, and any
    cycle among it is collected after the round, when the process waits for the next one."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _locked_round(now: datetime, policy: core.Policy, profile: core.Profile) -> Round:
    t0 = time.perf_counter()
    # The snapshot is read as one view (its own read-only transaction); the writes come in a
    # second transaction that re-checks every job it changes (still pending, still running).
    with consistent_view():
        state = load_state(now, profile)
    t1 = time.perf_counter()
    decisions = policy.decide(state.snapshot, profile, explain=True)
    t2 = time.perf_counter()
    with transaction.atomic():
        plan = persist_round(state, decisions, profile, now)
        record = Round(
            started_at=now,
            policy=decisions.policy,
            n_started=plan.n_started,
            n_waiting=plan.n_waiting,
            n_preempted=plan.n_preempted,
            decisions=plan.decisions,
            waits=pack_waits(plan.waits),
        )
        # estimated starts of the waiting jobs: not part of the digest (they move with the clock)
        record.estimated_starts = estimates_for(state, decisions, policy, profile)
        latest_pk, latest_estimates = None, None
        if plan.n_started or plan.n_preempted or plan.messages:
            record.save()  # a round that changed something is never a repeat: no digest needed
        else:
            record.digest = hashlib.sha256(
                json.dumps([record.policy, record.decisions, record.waits]).encode()
            ).hexdigest()
            latest = Round.objects.order_by("-id").values_list("pk", "digest", "estimated_starts").first()
            latest_pk, digest, latest_estimates = latest or (None, "", None)
            if digest != record.digest:
                record.save()
        carry_estimates(record, latest_pk, latest_estimates)
        t3 = time.perf_counter()
        record.phases_ms = {
            "snapshot": round((t1 - t0) * 1e3, 3),
            "policy": round((t2 - t1) * 1e3, 3),
            "persist": round((t3 - t2) * 1e3, 3),
        }
        record.duration_ms = round((t3 - t0) * 1e3, 3)
        record.finished_at = timezone.now()
        if record.pk is not None:
            Round.objects.filter(pk=record.pk).update(
                phases_ms=record.phases_ms, duration_ms=record.duration_ms, finished_at=record.finished_at
            )
            kept = int(settings.SHAREWISE_ROUNDS_KEPT)
            Round.objects.filter(pk__lte=record.pk - kept).delete()
        messages = plan.messages
        if messages:
            transaction.on_commit(lambda: _dispatch(record, messages), robust=True)
    # the dispatch ran inside the commit (on_commit): count it once, as itself
    after = (time.perf_counter() - t3) * 1e3 - record.phases_ms.get("dispatch", 0.0)
    record.phases_ms["commit"] = round(after, 3)
    return record


def _dispatch(record: Round, messages: Sequence[Message]) -> None:
    started = time.perf_counter()
    get_dispatcher()(messages)
    record.phases_ms["dispatch"] = round((time.perf_counter() - started) * 1e3, 3)
