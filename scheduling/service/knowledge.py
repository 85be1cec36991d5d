"""What the scheduler has learned, read from the database: the learned profile every round decides
with, and the iteration time and memory each job is scheduled with (docs/LEARNING.md, "In the
service").

- :func:`learned_profile`: :class:`~scheduling.core.learning.LearnedProfile` over the shipped
  table with the :class:`~scheduling.core.learning.Knowledge` of the ``LearnedSlowdown`` and
  ``IncompatiblePair`` rows. Kept per process while those tables do not change
  (:func:`knowledge_version`), so the policies' memos, kept per profile object, stay warm.
- :func:`class_records` / :func:`job_stats`: the pooled and per-job exclusive iteration times;
  :func:`recent_class_records`: the classes of a submission's answer, kept per process for
  ``SHAREWISE_CLASS_CACHE_S`` (1 s) and forgotten at once when this process learns a class
  (:func:`forget_class_records`).
- :func:`iteration_estimate`: the order of trust of ``choose_iter_time`` (measured for this job >
  learned for its class > declared > the profile's estimate).
- :func:`memory_estimate`: the job's memory per GPU at the full batch: measured for this job >
  declared > measured for its class (the largest) > unknown (the profile's guess).

The writing side (agent reports → these rows) is :mod:`scheduling.service.observations`.
Units: seconds (s), MB.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from time import monotonic
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Max, Sum
from django.db.models.signals import post_delete, post_save

from cluster.expressions import AnyOf
from cluster.models import Job
from scheduling.core import types as core
from scheduling.core.learning import (
    PRIOR_SIGMA,
    Estimate,
    IterKey,
    Knowledge,
    LearnedProfile,
    PairKey,
    SampleStats,
    choose_iter_time,
    normalise_model,
    posterior_log,
)
from scheduling.models import IncompatiblePair, JobIterTime, LearnedIterTime, LearnedSlowdown
from scheduling.profiles import load_default_profile
from scheduling.service.estimates import estimate_iter_time_s

_lock = threading.Lock()
_cached: tuple[tuple[Any, ...], LearnedProfile] | None = None


def table_of(profile: core.Profile) -> core.Profile:
    """The shipped table under ``profile`` (its ``base`` for a learned profile): what
    :func:`~scheduling.service.estimates.estimate_iter_time_s` reads throughputs from."""
    return profile.base if isinstance(profile, LearnedProfile) else profile


def knowledge_version() -> tuple[Any, ...]:
    """A cheap fingerprint of the learned slowdowns and incompatible pairs (2 aggregate queries):
    rows, samples and the latest update of each table. Any new sample or mark changes it."""
    slowdowns = LearnedSlowdown.objects.aggregate(n=Count("id"), samples=Sum("count"), at=Max("updated_at"))
    pairs = IncompatiblePair.objects.aggregate(n=Count("id"), at=Max("created_at"))
    return (slowdowns["n"], slowdowns["samples"], slowdowns["at"], pairs["n"], pairs["at"])


def load_knowledge() -> Knowledge:
    """The :class:`Knowledge` in the database (2 queries). ``memory_seen`` stays empty: the
    service folds measured memory into each job's own ``memory_mb`` (:func:`memory_estimate`),
    so the profile's ``memory_known`` sees it there, per job class rather than per model."""
    slowdowns: dict[PairKey, SampleStats] = {
        ((ma, sa), (mb, sb)): SampleStats(count, weight, mean, var)
        for ma, sa, mb, sb, count, weight, mean, var in LearnedSlowdown.objects.filter(count__gt=0)
        .order_by()
        .values_list("model_a", "sub_a", "model_b", "sub_b", "count", "weight", "mean_log", "var_log")
    }
    incompatible = frozenset(
        ((ma, sa), (mb, sb))
        for ma, sa, mb, sb in IncompatiblePair.objects.order_by().values_list(
            "model_a", "sub_a", "model_b", "sub_b"
        )
    )
    return Knowledge(slowdowns, incompatible)


def learned_profile() -> LearnedProfile:
    """The profile of the next round: the shipped table with what was learned, rebuilt only when
    :func:`knowledge_version` changed since the last call in this process."""
    global _cached
    version = knowledge_version()
    with _lock:
        if _cached is not None and _cached[0] == version:
            return _cached[1]
    profile = LearnedProfile(load_default_profile(), load_knowledge())
    with _lock:
        _cached = (version, profile)
    return profile


def forget_learned_profile() -> None:
    """Drop the process's cached profile (tests that rewrite the tables by hand)."""
    global _cached
    with _lock:
        _cached = None


@dataclass(frozen=True, slots=True)
class ClassRecord:
    """What is known of a job class ``(model, global batch, GPUs)``: its pooled exclusive
    iteration time at the full batch (``None`` without a sample) and the largest memory per GPU
    at the full batch any of its jobs reported (MB, ``None``: never)."""

    stats: SampleStats | None
    memory_mb: float | None


def class_key(model: str, batch_size: int, gpus: int) -> IterKey:
    """``(normalised model, global batch, GPUs)``: the key of ``LearnedIterTime``
    (``scheduling.core.learning.iter_key`` of a job with these fields)."""
    return (normalise_model(model), batch_size, gpus)


#: The columns of ``LearnedIterTime`` a :class:`ClassRecord` is made of, in ``class_records``' order.
CLASS_COLUMNS = ("model", "batch_size", "gpus", "count", "weight", "mean_log", "var_log", "memory_mb")


def class_records(keys: Iterable[IterKey] | None = None) -> dict[IterKey, ClassRecord]:
    """The :class:`ClassRecord` of every learned class (1 query), or of the models of ``keys``.

    With ``keys`` (each job submission asks) the query is plain SQL: the ORM's compilation of it
    cost several times its execution (issue 16)."""
    if keys is None:
        rows = LearnedIterTime.objects.order_by().values_list(*CLASS_COLUMNS)
    else:
        models = sorted({k[0] for k in keys})
        if not models:
            return {}
        quote = connection.ops.quote_name
        opts = LearnedIterTime.objects.model._meta  # Django's public _meta API, of the manager's model
        column = {c: quote(opts.get_field(c).column) for c in CLASS_COLUMNS}
        sql = (
            f"SELECT {', '.join(column.values())} FROM {quote(opts.db_table)} "
            f"WHERE {column['model']} IN ({', '.join(['%s'] * len(models))})"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, models)
            rows = cursor.fetchall()
    return {
        (model, batch, gpus): ClassRecord(SampleStats(count, weight, mean, var) if count else None, memory)
        for model, batch, gpus, count, weight, mean, var, memory in rows
    }


#: Models whose classes :func:`recent_class_records` keeps at most: the names are the
#: submitters' to choose, so past it the memory starts again (the next reads fill it).
KEPT_CLASS_MODELS = 1024

# Guards the three below. Normalised model → (monotonic() before its read, its classes' records).
_classes_lock = threading.Lock()
_classes: dict[str, tuple[float, dict[IterKey, ClassRecord]]] = {}
# Bumped by forget_class_records: a read that began before a forget does not store what it read.
_classes_generation = 0


def class_cache_s() -> float:
    """Seconds a model's learned classes stay kept per process for a submission's answer
    (setting ``SHAREWISE_CLASS_CACHE_S``, default 1; 0: read for every submission)."""
    return float(getattr(settings, "SHAREWISE_CLASS_CACHE_S", 1.0))


def recent_class_records(keys: Iterable[IterKey]) -> dict[IterKey, ClassRecord]:
    """:func:`class_records` of ``keys`` (every learned class of their models), each model's
    read by this process at most :func:`class_cache_s` seconds ago taken from memory (no query),
    the others read (1 query) and kept.

    Why: every submission's answer asks for its model's classes (issue 16: about 7 % of a POST's
    CPU), which change only when an agent's report teaches one. What this process learns it
    forgets at once (:func:`forget_class_records`, called by every writer of ``LearnedIterTime``
    in :mod:`scheduling.service.observations` and by the model's save and delete signals), so a
    sample learned here is in the next answer; what another process learns is in this
    process's answers within the lifetime. Only the answer uses it: rounds read the database.
    Thread-safe."""
    lifetime = class_cache_s()
    keys = list(keys)
    if lifetime <= 0:
        return class_records(keys)
    models = {k[0] for k in keys}
    found: dict[IterKey, ClassRecord] = {}
    now = monotonic()
    with _classes_lock:
        generation = _classes_generation
        missing = []
        for model in models:
            kept = _classes.get(model)
            if kept is not None and now - kept[0] < lifetime:
                found.update(kept[1])
            else:
                missing.append(model)
    if not missing:
        return found
    read: dict[str, dict[IterKey, ClassRecord]] = {model: {} for model in missing}
    for key, record in class_records((model, 0, 0) for model in missing).items():  # by model only
        read.setdefault(key[0], {})[key] = record
        found[key] = record
    with _classes_lock:
        if generation == _classes_generation:  # no class learned here since the read began
            if len(_classes) + len(read) > KEPT_CLASS_MODELS:
                _classes.clear()
            _classes.update((model, (now, records)) for model, records in read.items())
    return found


def forget_class_records(models: Iterable[str] | None = None) -> None:
    """Drop the classes :func:`recent_class_records` keeps of ``models`` (normalised model names,
    as ``LearnedIterTime.model`` holds them; ``None``: of every model), now and again when the
    current transaction commits (a read between the write and its commit still sees the old rows
    and may keep them: the second drop removes them). For every writer of ``LearnedIterTime``:
    a report teaches one class, and the other models' kept classes stay valid. A read of any
    model under way meanwhile is not kept (one generation count for all)."""
    dropped = None if models is None else set(models)

    def forget() -> None:
        global _classes_generation
        with _classes_lock:
            if dropped is None:
                _classes.clear()
            else:
                for model in dropped:
                    _classes.pop(model, None)
            _classes_generation += 1

    forget()
    if connection.in_atomic_block:  # outside one the write is committed: once is enough
        transaction.on_commit(forget, robust=True)


def _class_changed(sender: Any, **kwargs: Any) -> None:
    forget_class_records()  # every model: an edit through the ORM (the admin) may rename the row's


def connect() -> None:
    """Forget the kept classes whenever a ``LearnedIterTime`` row is saved or deleted through
    the ORM (the admin, a test's rows; ``SchedulingConfig.ready``). The service's own writes
    (plain statements and ``update()``, which send no signal) call :func:`forget_class_records`."""
    post_save.connect(_class_changed, sender=LearnedIterTime, dispatch_uid="knowledge.class_saved")
    post_delete.connect(_class_changed, sender=LearnedIterTime, dispatch_uid="knowledge.class_deleted")


def job_stats(job_ids: Iterable[int]) -> dict[int, SampleStats]:
    """Each job's exclusive samples (``JobIterTime``), for the jobs of ``job_ids`` (primary keys)
    that have some (1 query; none for no ids).

    By the ids, one array parameter (``AnyOf``), not joined to the jobs on their status: the
    snapshot passes the pending and running jobs it has just read. Filtered on ``Job.status``,
    PostgreSQL without statistics started from the ``job_status`` index, whose entries for every
    row version once pending or running stay until VACUUM: the statement's cost grew with the jobs
    that had ended (docs/PERFORMANCE.md §10, "The round's two reads through the status index")."""
    ids = list(job_ids)
    if not ids:
        return {}
    rows = JobIterTime.objects.filter(AnyOf(F("job_id"), ids), count__gt=0).order_by()
    return {
        job: SampleStats(count, weight, mean, var)
        for job, count, weight, mean, var in rows.values_list(
            "job_id", "count", "weight", "mean_log", "var_log"
        )
    }


def iteration_estimate(
    own: SampleStats | None,
    record: ClassRecord | None,
    declared_s: float | None,
    profile_s: float,
) -> Estimate:
    """The exclusive iteration time at the full batch (s) a round uses for a job, with its source
    (``measured``, ``learned``, ``declared``, ``profile``): ``choose_iter_time`` of the job's own
    samples ``own``, its class's, the submitted ``iteration_time_s`` and the profile's
    ``profile_s``."""
    return choose_iter_time(own, record.stats if record else None, declared_s, profile_s)


def memory_estimate(
    measured_mb: float | None, declared_mb: float | None, record: ClassRecord | None
) -> float | None:
    """The job's memory per GPU at the full batch (MB) for the round: its own measurement (the
    truth, when the job has run), else what the submitter declared, else the largest its class
    reported; ``None``: unknown (the profile's guess, and the job does not share unless
    ``SHAREWISE_SHARE_UNKNOWN``)."""
    if measured_mb is not None:
        return measured_mb
    if declared_mb is not None:
        return declared_mb
    return record.memory_mb if record is not None else None


def job_estimates(jobs: Iterable[Job], *, new: bool = False) -> dict[int, Estimate]:
    """:func:`iteration_estimate` of each of ``jobs`` (rows), by primary key (2 queries): what the
    job API shows as ``scheduler_iteration_time_s`` and ``iteration_time_source``. ``new``: the
    jobs were created by this request, so none has samples of its own yet (only an agent running
    a job reports them): 1 query for the classes, none while this process has read them in the
    last ``SHAREWISE_CLASS_CACHE_S`` (:func:`recent_class_records`)."""
    jobs = list(jobs)
    own = {} if new else job_stats(j.pk for j in jobs)
    read = recent_class_records if new else class_records
    records = read(class_key(j.model, j.batch_size, j.gpus) for j in jobs)
    table = load_default_profile()
    profile_s: dict[IterKey, float] = {}
    answer = {}
    for job in jobs:
        key = (job.model, job.batch_size, job.gpus)
        if key not in profile_s:
            profile_s[key] = estimate_iter_time_s(table, *key)
        answer[job.pk] = iteration_estimate(
            own.get(job.pk),
            records.get(class_key(*key)),
            job.iteration_time_s,
            profile_s[key],
        )
    return answer


@dataclass(frozen=True, slots=True)
class SlowdownView:
    """A learned slowdown beside its prior: the shipped table's ξ (``prior``) and where it comes
    from (``prior_source``: measured, predicted, default), and the posterior the rounds use."""

    prior: float
    prior_source: str
    posterior: float


def slowdown_view(row: LearnedSlowdown) -> SlowdownView:
    """The :class:`SlowdownView` of one ``LearnedSlowdown`` row: the posterior of
    ``LearnedProfile`` (``posterior_log`` over the table's ξ with its source's σ)."""
    table = load_default_profile()
    a = core.Job(0, "", row.model_a, row.sub_a, 1, 1, 0.0, 1.0)
    b = core.Job(0, "", row.model_b, row.sub_b, 1, 1, 0.0, 1.0)
    prior = table.slowdown(a, row.sub_a, b, row.sub_b)[0]
    source = table.slowdown_source(a, row.sub_a, b, row.sub_b)
    posterior = math.exp(posterior_log(prior, PRIOR_SIGMA.get(source, 1.0), row.stats))
    return SlowdownView(prior, source, posterior)
