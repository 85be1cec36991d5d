"""The live driver: where the database meets the scheduling core.

Every scheduler step is one :func:`tick`: the heartbeat check, then a round. Celery's
``sharewise.run_round`` task (``scheduling.tasks``), ``manage.py run_scheduler`` and the demo
(``demo/``) all call it. A round (ARCHITECTURE.md, "Data flow of a round"):

1. :class:`RoundLease` (``lease``) — only one round at a time, across processes and machines.
2. :func:`load_state` / :func:`build_snapshot` (``snapshot``) — GPUs, running placements,
   pending jobs and quotas as a :class:`~scheduling.core.types.Snapshot`; :class:`ClusterState`
   maps the core's dense GPU ids back to ``GPU`` rows. Iteration-time estimates and attained
   service come from ``estimates``, quotas and the fairness settings from ``fairness``.
3. The configured policy (setting ``SHAREWISE_POLICY``, :func:`policy_named`) decides.
4. :func:`run_round` (``rounds``) writes, in one transaction (``persist``): placements, the jobs'
   status, ``JobEvent`` rows and the :class:`~scheduling.models.Round` record.
5. After commit, one ``sharewise.apply_placement`` message per (job, node) change goes to the
   dispatcher (``dispatch``): Celery to queue ``node.<name>`` with a broker, else the
   in-process subscribers (:func:`subscribe`). Messages are built with the wire protocol of
   :mod:`agent.messages`; their generations follow ``generations`` (AGENT.md §1–2).

Between rounds, the node agents report (docs/AGENT.md §2–3): :func:`record_event`
(``agent_events``), :func:`record_heartbeat` and :func:`check_heartbeats` (``heartbeats``). A job
that leaves its GPUs outside a round (``jobs``: :func:`release`, :func:`requeue`,
:func:`cancel_job`, :func:`stop_job`) tells its agents, sends its GPU partners their new slowdown
(:func:`refresh_partners`) and asks for a round (:func:`request_round`, ``trigger``, debounced).
Why a pending job waits and when it may start (the latest round's reason and estimate) is
:func:`waiting_details` (``waiting``). Where each tenant stands against its quota now (over
quota, borrowed GPUs, per GPU type) is :func:`quota_use` (``over_quota``), its GPU-hours over
sliding windows and the windowed fairness :func:`usage_windows` (``gpu_hours``; docs/FAIRNESS.md
§4). ``GET /metrics`` is
:func:`scheduling.service.prometheus.metrics_view`.

What the agents measure is learned (docs/LEARNING.md, "In the service"): ``observations`` folds
the reports into summaries in the database, ``knowledge`` reads them back as the round's
:func:`learned_profile` and each job's iteration time (:func:`job_estimates`).

Callers outside this package use only the names below (the web views, the Celery tasks, the
management commands, the demo, the dashboard).

Units: seconds (s), MB, GPUs, iterations. Times given to the core are POSIX timestamps (s).
"""

from scheduling.service.agent_events import AgentError, AgentEvent, record_event
from scheduling.service.bulk import insert_rows, insert_values
from scheduling.service.closed_charge import GRID_S as CLOSED_GRID_S
from scheduling.service.closed_charge import MARGIN_S as CLOSED_MARGIN_S
from scheduling.service.closed_charge import WindowCharge, window_charge
from scheduling.service.dispatch import (
    Dispatcher,
    Message,
    broker_configured,
    celery_dispatch,
    get_dispatcher,
    local_dispatch,
    set_dispatcher,
    slowdown_of,
    subscribe,
    unsubscribe,
)
from scheduling.service.estimates import UNKNOWN_MODEL_ITER_TIME_S, attained_after_run, estimate_iter_time_s
from scheduling.service.fairness import scheduler_config, summed_quotas, tenant_quotas
from scheduling.service.generations import next_generations
from scheduling.service.gpu_hours import (
    DEFAULT_WINDOWS_S,
    MAX_WINDOW_S,
    MAX_WINDOWS,
    MIN_WINDOW_S,
    TenantWindow,
    UsageWindows,
    WindowFairness,
    charged_segments,
    parse_windows,
    usage_windows,
)
from scheduling.service.health import CACHE_ERRORS, OUTAGE_ERRORS, outage_message, readiness
from scheduling.service.heartbeats import check_heartbeats, heartbeat_interval_s, mark_heard, record_heartbeat
from scheduling.service.jobs import cancel_job, refresh_partners, release, requeue, stop_job
from scheduling.service.knowledge import (
    SlowdownView,
    forget_learned_profile,
    job_estimates,
    learned_profile,
    slowdown_view,
)
from scheduling.service.lease import ROUND_LEASE, RoundLease
from scheduling.service.over_quota import TenantQuotaUse, quota_rows, quota_use
from scheduling.service.retention import prune_job_events
from scheduling.service.rounds import policy_named, run_round
from scheduling.service.silence import heartbeat_timeout_s
from scheduling.service.snapshot import (
    ClusterState,
    build_snapshot,
    consistent_view,
    load_state,
    node_takes_jobs,
)
from scheduling.service.tick import Tick, tick
from scheduling.service.trigger import ROUND_REQUEST_KEY, ROUND_TASK, clear_round_request, request_round
from scheduling.service.waiting import NOT_YET_CONSIDERED, Waiting, waiting_details

__all__ = [
    "CACHE_ERRORS",
    "CLOSED_GRID_S",
    "CLOSED_MARGIN_S",
    "DEFAULT_WINDOWS_S",
    "MAX_WINDOWS",
    "MAX_WINDOW_S",
    "MIN_WINDOW_S",
    "OUTAGE_ERRORS",
    "NOT_YET_CONSIDERED",
    "ROUND_LEASE",
    "ROUND_REQUEST_KEY",
    "ROUND_TASK",
    "UNKNOWN_MODEL_ITER_TIME_S",
    "AgentError",
    "AgentEvent",
    "ClusterState",
    "Dispatcher",
    "Message",
    "RoundLease",
    "SlowdownView",
    "TenantQuotaUse",
    "TenantWindow",
    "UsageWindows",
    "Tick",
    "Waiting",
    "WindowCharge",
    "WindowFairness",
    "attained_after_run",
    "broker_configured",
    "build_snapshot",
    "cancel_job",
    "charged_segments",
    "celery_dispatch",
    "check_heartbeats",
    "clear_round_request",
    "consistent_view",
    "estimate_iter_time_s",
    "forget_learned_profile",
    "get_dispatcher",
    "heartbeat_interval_s",
    "heartbeat_timeout_s",
    "insert_rows",
    "insert_values",
    "job_estimates",
    "learned_profile",
    "load_state",
    "local_dispatch",
    "mark_heard",
    "next_generations",
    "node_takes_jobs",
    "outage_message",
    "parse_windows",
    "policy_named",
    "prune_job_events",
    "quota_rows",
    "quota_use",
    "readiness",
    "record_event",
    "record_heartbeat",
    "refresh_partners",
    "release",
    "request_round",
    "requeue",
    "run_round",
    "scheduler_config",
    "set_dispatcher",
    "slowdown_of",
    "slowdown_view",
    "stop_job",
    "subscribe",
    "summed_quotas",
    "tenant_quotas",
    "tick",
    "unsubscribe",
    "usage_windows",
    "window_charge",
    "waiting_details",
]
