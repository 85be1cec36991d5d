"""What the agents measure, folded into the learned profile's tables (docs/LEARNING.md, "In the
service"): iteration times, slowdowns, memory, and pairs that ran out of memory together.

Called by :mod:`scheduling.service.agent_events` inside the transaction of the event, with the
job's row locked; each summary row is read, updated with ``SampleStats.add`` and written back
under a row lock (``select_for_update``: on PostgreSQL two events of one pair queue for it); a
class's memory is read without one and written only when it grows (:func:`observe_memory`).

- :func:`observe_progress`: a ``started``, ``progress`` or ``finished`` event with a measured
  iteration time ``t`` (s, at the job's sub-batch ``b``, including the slowdown of its
  co-location). It counts only if the event's generation is the job's latest and the co-location
  that generation described still holds (its partners per GPU, ``Placement.shared_with``): the
  agent then ran exactly what the server believes. Alone on all its GPUs: an exclusive sample,
  brought to the full batch (``full_batch_time_s``) for the job and its class. Sharing: a
  slowdown sample ``ξ = t / t_excl(b)`` (``t_excl``: the job's own measured exclusive time if
  any, else the time the rounds use, at ``b``) for the pair with the partner whose predicted ξ
  is the largest (a gang runs at its slowest GPU, MODEL.md §2), written beside the prediction on
  the job's placement rows and in the :class:`~scheduling.models.SlowdownObservation` log.
- :func:`observe_memory`: a reported peak memory ``m`` per GPU at sub-batch ``b``, brought to
  the full batch with the profile's memory curve, kept (the largest) on the job and its class.
- :func:`oom_partners` / :func:`mark_incompatible`: the jobs beside which a job ran out of
  memory, and the pairs at those sub-batches marked incompatible.

Units: seconds (s), MB, dimensionless ξ.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Model, Q
from django.utils import timezone

from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import Job, Placement
from scheduling.core import types as core
from scheduling.core.learning import SampleStats, full_batch_time_s, normalise_model, pair_id
from scheduling.models import (
    IncompatiblePair,
    JobIterTime,
    LearnedIterTime,
    LearnedSlowdown,
    SlowdownObservation,
)
from scheduling.profiles import load_default_profile
from scheduling.service.estimates import estimate_iter_time_s
from scheduling.service.generations import latest_generation
from scheduling.service.knowledge import class_key, class_records, forget_class_records, iteration_estimate
from scheduling.service.placement_facts import JobPlacements

log = logging.getLogger(__name__)

#: A job that ran out of memory blames the partners on its GPUs now and those whose placement on
#: them ended this recently (s) **(ours)**: when both jobs of a pair die of one out-of-memory, the
#: first report ends its placement moments before the second arrives.
OOM_PARTNER_WINDOW_S = 30.0


def core_job(job: Job, iter_time_s: float = 1.0) -> core.Job:
    """The core's view of ``job`` for the profile's curves (speed ``iter_time_s`` at full batch)."""
    return core.Job(
        job.pk, "", job.model, job.batch_size, job.gpus, job.iterations, 0.0, iter_time_s, job.gpu_memory_mb
    )


#: The columns of a ``Stats`` row a sample writes.
STATS_FIELDS = ("count", "weight", "mean_log", "var_log", "updated_at")


def locked(table: type[Model], **key: Any) -> Any:
    """The row of ``table`` with ``key``, created if missing (a concurrent insert of the same key
    loses to the first and reads it: ``get_or_create``), locked for this transaction. The row that
    exists — nearly always — is read by one plain statement (:mod:`cluster.plain_rows`)."""
    found = plain_rows.get_by(table, key, lock=True)
    if found is not None:
        return found
    return table.objects.select_for_update().get_or_create(**key)[0]


def add_sample(row: Any, value: float) -> SampleStats:
    """Add one sample to a ``Stats`` row and save it (``updated_at``: the wall clock, which
    :func:`~scheduling.service.knowledge.knowledge_version` watches); returns the new summary."""
    stats = row.stats.add(value)
    row.set_stats(stats)
    row.updated_at = timezone.now()
    plain_rows.update(row, STATS_FIELDS)
    return stats


def observe_memory(job: Job, memory_mb: float, placements: JobPlacements | None = None) -> None:
    """Peak memory ``memory_mb`` per GPU at the job's current sub-batch (MB), as the full batch's
    ``m · mem(B) / mem(b)`` (the profile's memory is affine in the anchor, so the ratio holds);
    the job and its class keep the largest seen. Ignored when the job holds no GPU.
    ``placements``: the job's rows already read under its lock (saves the query)."""
    if placements is None:
        sub = Placement.objects.filter(job=job, active=True).values_list("sub_batch", flat=True).first()
    else:
        sub = next((r.sub_batch for r in placements.active()), None)
    if sub is None:
        return
    table = load_default_profile()
    unit = core.Job(job.pk, "", job.model, job.batch_size, job.gpus, 1, 0.0, 1.0, 1.0)
    full = memory_mb * table.memory_mb(unit, job.batch_size) / table.memory_mb(unit, sub)
    if job.measured_memory_mb is None or full > job.measured_memory_mb:
        job.measured_memory_mb = full
        plain_rows.update(job, ["measured_memory_mb"])
    model, batch, gpus = class_key(job.model, job.batch_size, job.gpus)
    key = {"model": model, "batch_size": batch, "gpus": gpus}
    # A plain read first, not a locked one: nearly every report is no larger than what the class
    # has, and then nothing is written or locked. A locked read held the class's row to the end
    # of every reporting event's transaction, so all the jobs of a class queued for it (with a
    # few classes, 5 of 16 web threads waiting; PERFORMANCE.md §10). Where the memory grows, a
    # conditional UPDATE writes it: of two concurrent ones, the larger value wins either way.
    known = plain_rows.get_by(LearnedIterTime, key)
    if known is not None and known.memory_mb is not None and known.memory_mb >= full:
        return
    if known is None:
        LearnedIterTime.objects.get_or_create(**key)  # a concurrent insert of the class: it wins
    grows = Q(memory_mb__isnull=True) | Q(memory_mb__lt=full)
    LearnedIterTime.objects.filter(grows, **key).update(memory_mb=full)
    forget_class_records([model])  # the kept records hold the class's memory too


#: A sample for a summary row that many jobs share (a class's iteration time, a pair's slowdown):
#: ``(table, its key's fields, value)``; folded by :func:`fold_shared`.
SharedSample = tuple[type[Model], dict[str, Any], float]


def fold_shared(samples: list[SharedSample]) -> None:
    """Add each sample to its row (created if missing) under the row's lock. The caller calls
    this last in its transaction, so the lock is held only until the commit: every event of a
    class's jobs folds into one row, and a lock taken in the middle of an event's transaction made
    them queue for its whole rest (100–460 ms a call in the 15,000-job run, PERFORMANCE.md §10).
    Rows are locked in one order (table, then key), so two events never wait on each other."""
    for table, key, value in sorted(samples, key=lambda s: (meta(s[0]).label, sorted(s[1].items()))):
        add_sample(locked(table, **key), value)
    learned = {key["model"] for table, key, _ in samples if table is LearnedIterTime}
    if learned:
        forget_class_records(learned)  # this process's next submission answers see the class learned


def observe_progress(
    job: Job,
    generation: int,
    iter_time_s: float,
    now: datetime,
    placements: JobPlacements | None = None,
    shared: list[SharedSample] | None = None,
) -> str:
    """Fold one measured iteration time (s, at the job's sub-batch) into the learned tables
    (module docstring). Returns what it was: ``"exclusive"``, ``"slowdown"``, or why it was
    ignored (``"stale"``: an older generation; ``"changed"``: a partner left since; ``"idle"``:
    no GPU held). ``placements``: the job's rows already read under its lock (saves two queries).
    ``shared``: where given, the samples for rows other jobs share (the class's, the pair's) are
    appended to it for the caller's :func:`fold_shared` at the end of its transaction; else they
    are folded here. The caller holds the job's row lock (:func:`~scheduling.service.record_event`)."""
    pending: list[SharedSample] = [] if shared is None else shared
    what = _observe(job, generation, iter_time_s, now, placements, pending)
    if shared is None:
        fold_shared(pending)
    return what


def _observe(
    job: Job,
    generation: int,
    iter_time_s: float,
    now: datetime,
    placements: JobPlacements | None,
    shared: list[SharedSample],
) -> str:
    """:func:`observe_progress` with the shared rows' samples appended to ``shared``."""
    if placements is None:
        rows = list(
            Placement.objects.filter(job=job, active=True).values_list(
                "gpu_id", "sub_batch", "shared_with", "predicted_slowdown"
            )
        )
        latest = latest_generation(job.pk) if rows else None
    else:
        rows = [(r.gpu_id, r.sub_batch, r.shared_with, r.predicted_slowdown) for r in placements.active()]
        latest = placements.latest()
    if not rows:
        return "idle"
    if generation != latest:
        return "stale"
    now_beside = {gpu: (other, sub) for gpu, other, sub in _beside(job.pk, [r[0] for r in rows])}
    if any(shared != now_beside.get(gpu, (None,))[0] for gpu, _, shared, _ in rows):
        return "changed"
    sub = rows[0][1]
    table = load_default_profile()
    if not now_beside:
        full = full_batch_time_s(table, core_job(job), sub, iter_time_s)
        own = plain_rows.get_by(JobIterTime, {"job": job.pk}, lock=True)
        first = own is None or own.count == 0
        if own is None:
            # The caller holds the job's row lock (record_event), and every writer of this row
            # does: a plain insert, without get_or_create's savepoint and re-read (3 statements
            # per job, PERFORMANCE.md §10). Same values as add_sample on a new row.
            own = JobIterTime(job=job, updated_at=timezone.now())
            own.set_stats(SampleStats().add(full))
            plain_rows.insert(own)
        else:
            add_sample(own, full)
        if first:  # a class takes each job's first exclusive report only, as core.learning.Learner
            model, batch, gpus = class_key(job.model, job.batch_size, job.gpus)
            shared.append((LearnedIterTime, {"model": model, "batch_size": batch, "gpus": gpus}, full))
        return "exclusive"
    # the pair with the largest predicted ξ sets the gang's pace: the measurement is its ξ
    gpu, _, partner_pk, predicted = max(rows, key=lambda r: (r[3] or 0.0, -r[0]))
    partner_sub = now_beside[gpu][1]
    partner = Job.objects.filter(pk=partner_pk).values_list("model", flat=True).first()
    if partner is None:
        return "changed"
    xi = iter_time_s / exclusive_time_s(job, sub, table)
    a, b = (normalise_model(job.model), sub), (normalise_model(partner), partner_sub)
    shared.append((LearnedSlowdown, {"model_a": a[0], "sub_a": a[1], "model_b": b[0], "sub_b": b[1]}, xi))
    measured = record_observation(job, generation, partner_pk, a, b, predicted or 1.0, xi, now)
    Placement.objects.filter(job=job, active=True, shared_with=partner_pk).update(measured_slowdown=measured)
    return "slowdown"


def _beside(job_id: int, gpu_ids: list[int]) -> list[tuple[int, int, int]]:
    """``(GPU, job, sub-batch)`` of the other jobs' active placement rows on ``gpu_ids`` (one
    plain statement: an event's reads cost the ORM more to compile than the database to run)."""
    q = connection.ops.quote_name
    p = meta(Placement)
    gpu, job, sub, active = (q(p.get_field(n).column) for n in ("gpu", "job", "sub_batch", "active"))
    sql = (
        f"SELECT {gpu}, {job}, {sub} FROM {q(p.db_table)} "
        f"WHERE {active} AND {gpu} IN ({plain_rows.marks(len(gpu_ids))}) AND {job} <> %s"
    )
    return [(g, j, b) for g, j, b in plain_rows.select(sql, [*gpu_ids, job_id], (None, None, None))]


def exclusive_time_s(job: Job, sub_batch: int, table: core.Profile) -> float:
    """The job's exclusive iteration time at ``sub_batch`` (s): its own measured one if any, else
    the one the rounds use (``iteration_estimate`` without the job's samples), both at the full
    batch, then ``t(b) = t(B) · sps(B) / sps(b)`` (the profile's curve)."""
    own = JobIterTime.objects.filter(job=job, count__gt=0).first()
    if own is not None:
        full = own.stats.mean
    else:
        key = class_key(job.model, job.batch_size, job.gpus)
        profile_s = estimate_iter_time_s(table, job.model, job.batch_size, job.gpus)
        full = iteration_estimate(None, class_records([key]).get(key), job.iteration_time_s, profile_s).value
    return table.iter_time_s(core_job(job, full), sub_batch)


def record_observation(
    job: Job,
    generation: int,
    partner: int,
    a: tuple[str, int],
    b: tuple[str, int],
    predicted: float,
    xi: float,
    now: datetime,
) -> float:
    """Add ``xi`` to the job's observation of this co-location segment (one row per job and
    generation: the prediction of that placement and the mean of its measured ξ); returns that
    mean. Trims the log to ``SHAREWISE_OBSERVATIONS_KEPT`` rows."""
    row = SlowdownObservation.objects.select_for_update().filter(job=job.pk, generation=generation).first()
    if row is not None:
        row.measured = (row.measured * row.samples + xi) / (row.samples + 1)
        row.samples += 1
        row.save(update_fields=["measured", "samples"])
        return row.measured
    row = SlowdownObservation.objects.create(
        job=job.pk,
        partner=partner,
        generation=generation,
        model_a=a[0],
        sub_a=a[1],
        model_b=b[0],
        sub_b=b[1],
        predicted=predicted,
        measured=xi,
        at=now,
    )
    kept = int(settings.SHAREWISE_OBSERVATIONS_KEPT)
    SlowdownObservation.objects.filter(pk__lte=row.pk - kept).delete()
    return xi


def oom_partners(job: Job, now: datetime | None = None) -> list[tuple[int, str, int, int]]:
    """``(partner pk, partner model, partner sub-batch, the job's sub-batch)`` of every job that
    shares one of ``job``'s GPUs now, or whose placement on one of them ended within
    :data:`OOM_PARTNER_WINDOW_S` (and after the job's current run began)."""
    now = now or timezone.now()
    rows = list(
        Placement.objects.filter(job=job, active=True).values_list("gpu_id", "sub_batch", "created_at")
    )
    if not rows:
        return []
    began = min(r[2] for r in rows)
    recent = Q(active=False, ended_at__gte=max(began, now - timedelta(seconds=OOM_PARTNER_WINDOW_S)))
    found: dict[int, tuple[int, str, int, int]] = {}
    for partner, model, sub in (
        Placement.objects.filter(Q(active=True) | recent, gpu_id__in=[r[0] for r in rows])
        .exclude(job=job)
        .values_list("job_id", "job__model", "sub_batch")
    ):
        found.setdefault(partner, (partner, model, sub, rows[0][1]))
    return sorted(found.values())


def mark_incompatible(job: Job, partners: list[tuple[int, str, int, int]], reason: str, now: datetime) -> int:
    """Mark ``job`` and each of ``partners`` (:func:`oom_partners`) incompatible at their
    sub-batches (``pair_id`` order; a pair already marked is kept as first recorded). Returns how
    many pairs were new.

    The pairs are written in their keys' order (docs/LOCKS.md): an insert of a key another open
    transaction has inserted waits for it, and two events writing two pairs in opposite orders
    (the order of their partners' ids) deadlocked (tests/service/test_incompatible_lock_order.py)."""
    new = 0
    pairs: list[tuple[tuple[tuple[str, int], tuple[str, int]], tuple[str, int], int]] = []
    for partner, model, partner_sub, sub in partners:
        a, b = (normalise_model(job.model), sub), (normalise_model(model), partner_sub)
        pairs.append((pair_id(a, b), a, partner))
    for (first, second), a, partner in sorted(pairs):
        mine = first == a
        _, created = IncompatiblePair.objects.get_or_create(
            model_a=first[0],
            sub_a=first[1],
            model_b=second[0],
            sub_b=second[1],
            defaults={
                "job": job.pk if mine else partner,
                "partner": partner if mine else job.pk,
                "reason": reason[:500],
                "created_at": timezone.now(),
            },
        )
        new += created
    if new:
        log.warning(
            "job %d ran out of memory beside jobs %s: %d pairs marked incompatible", job.pk, partners, new
        )
    return new
