"""A job's mutable state inside the simulator, and the copy of a job a policy sees (pure Python)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import fields

from scheduling.core.types import Job, JobId, Placement, RunningJob


class JobState:
    """Mutable bookkeeping of one job inside the simulator (never shown to a policy).

    Progress ``done`` (iterations, fractional), ``attained`` (GPU-s held), ``charged`` (GPU-s
    charged, docs/FAIRNESS.md), ``shared_s``/``queue_s`` (s), the current ``placement`` with its
    iteration time ``iter_s`` (s), rate (iterations/s), slowdown ``xi`` and charge rate (GPU-s per
    s); ``last``: when the counters were last brought up to date (s); ``resume_at``: end of the
    restart cost (s); ``version``: invalidates stale completion events.
    """

    __slots__ = (
        "base",
        "view",
        "done",
        "attained",
        "charged",
        "shared_s",
        "queued_since",
        "queue_s",
        "first_start",
        "placement",
        "iter_s",
        "rate",
        "xi",
        "charge_rate",
        "last",
        "resume_at",
        "mark",
        "mark_done",
        "version",
        "preemptions",
    )

    def __init__(self, job: Job) -> None:
        self.base = job
        self.view = job  # what a policy sees while the job is pending
        self.done = job.iterations_done
        self.attained = job.attained_gpu_s
        self.charged = 0.0
        self.shared_s = 0.0
        self.queued_since = job.waiting_since
        self.queue_s = 0.0
        self.first_start = math.nan
        self.placement: Placement | None = None
        self.iter_s = job.iter_time_s
        self.rate = 0.0
        self.xi = 1.0
        self.charge_rate = 0.0
        self.last = 0.0
        self.resume_at = 0.0
        self.mark = 0.0  # last start or re-plan (s), and the progress then (fidelity's overhead charge)
        self.mark_done = 0.0
        self.version = 0
        self.preemptions = 0


_JOB_FIELDS = (
    "id",
    "tenant",
    "model",
    "batch_size",
    "gpus",
    "iterations",
    "submit_time",
    "iter_time_s",
    "memory_mb",
    "iterations_done",
    "attained_gpu_s",
    "queued_since",
    "priority",
    "sharing_allowed",
    "gpu_types",
)
if tuple(f.name for f in fields(Job)) != _JOB_FIELDS or hasattr(Job, "__post_init__"):  # pragma: no cover
    raise ImportError(
        "scheduling.core.types.Job changed its fields or gained a __post_init__: "
        "update scheduling.sim.job_state.with_progress"
    )
if tuple(f.name for f in fields(RunningJob)) != ("job", "placement") or hasattr(
    RunningJob, "__post_init__"
):  # pragma: no cover
    raise ImportError(
        "scheduling.core.types.RunningJob changed its fields or gained a __post_init__: "
        "update scheduling.sim.job_state.running_view"
    )


# The slots' setters: a frozen dataclass's ``__init__`` sets each field through
# ``object.__setattr__``, which costs half as much again as the slot's own setter; Job has no
# ``__post_init__`` to skip (checked above), so setting the slots directly builds an equal object.
(
    _set_id,
    _set_tenant,
    _set_model,
    _set_batch_size,
    _set_gpus,
    _set_iterations,
    _set_submit_time,
    _set_iter_time_s,
    _set_memory_mb,
    _set_iterations_done,
    _set_attained_gpu_s,
    _set_queued_since,
    _set_priority,
    _set_sharing_allowed,
    _set_gpu_types,
) = (vars(Job)[name].__set__ for name in _JOB_FIELDS)
_new = object.__new__


def with_progress(job: Job, iterations_done: float, attained_gpu_s: float, queued_since: float | None) -> Job:
    """``dataclasses.replace(job, iterations_done=…, attained_gpu_s=…, queued_since=…)``, written
    out because it runs for every running job in every round and ``replace`` is ~6× slower (and
    ``Job(…)`` 1.5×: the slots are set directly); the field list is checked against :class:`Job`
    at import time."""
    new = _new(Job)
    _set_id(new, job.id)
    _set_tenant(new, job.tenant)
    _set_model(new, job.model)
    _set_batch_size(new, job.batch_size)
    _set_gpus(new, job.gpus)
    _set_iterations(new, job.iterations)
    _set_submit_time(new, job.submit_time)
    _set_iter_time_s(new, job.iter_time_s)
    _set_memory_mb(new, job.memory_mb)
    _set_iterations_done(new, iterations_done)
    _set_attained_gpu_s(new, attained_gpu_s)
    _set_queued_since(new, queued_since)
    _set_priority(new, job.priority)
    _set_sharing_allowed(new, job.sharing_allowed)
    _set_gpu_types(new, job.gpu_types)
    return new


_set_job, _set_placement = vars(RunningJob)["job"].__set__, vars(RunningJob)["placement"].__set__


def running_view(
    job: Job, iterations_done: float, attained_gpu_s: float, queued_since: float | None, placement: Placement
) -> RunningJob:
    """``RunningJob(with_progress(job, …), placement)``, its two slots set directly (a frozen
    dataclass's ``__init__`` goes through ``object.__setattr__``): the view of a running job in
    a snapshot, built for every running job in every round; the fields are checked at import
    time."""
    view = _new(RunningJob)
    _set_job(view, with_progress(job, iterations_done, attained_gpu_s, queued_since))
    _set_placement(view, placement)
    return view


def views_at(
    now: float,
    running: Iterable[JobId],
    states: dict[JobId, JobState],
    views: dict[JobId, RunningJob],
    believe: Callable[[Job], Job] | None,
) -> tuple[tuple[RunningJob, ...], dict[JobId, RunningJob]]:
    """The views at ``now`` (s) of the ``running`` jobs (ids, in order) of a snapshot, and the
    same by id: progress and attained GPU-s brought up to ``now`` at the job's rate
    (``Simulator._progress_at``, inlined); a view of ``views`` (made earlier at ``now``) is
    reused while its job is on the same placement. ``believe``: the belief's view of a job
    (learning runs), or ``None``."""
    out: list[RunningJob] = []
    fresh: dict[JobId, RunningJob] = {}
    for jid in running:
        s = states[jid]
        placement = s.placement
        assert placement is not None
        view = views.get(jid)
        if view is None or view.placement is not placement:
            last = s.last
            attained = s.attained + s.base.gpus * (now - last)
            base = s.base if believe is None else believe(s.base)
            t0 = s.resume_at if s.resume_at > last else last
            done = s.done + s.rate * (now - t0) if now > t0 else s.done
            view = running_view(base, done, attained, s.queued_since, placement)
        out.append(view)
        fresh[jid] = view
    return tuple(out), fresh
