"""Prometheus metrics of the scheduler (``GET /metrics``), read from the database at scrape time.

Rounds run in Celery workers or ``run_scheduler`` while ``/metrics`` is served by the web
processes, so in-process counters would show only the scraping process. The
:class:`SchedulerCollector` therefore reads what every process wrote (a handful of aggregate
queries per scrape):

=========================================  =====  ===========================================
metric                                     type   meaning
=========================================  =====  ===========================================
``sharewise_round_duration_seconds``       sum.   recorded rounds: count and total duration (s)
``sharewise_last_round_duration_seconds``  gauge  the latest recorded round (s)
``sharewise_last_round_timestamp_seconds`` gauge  when it started (POSIX s)
``sharewise_jobs{tenant,status}``          gauge  pending and running jobs per tenant
``sharewise_gpus_in_use{tenant}``          gauge  GPUs held by the tenant's running jobs
``sharewise_tenant_over_quota{tenant}``    gauge  1 if the tenant holds GPUs above its quota
``sharewise_tenant_over_quota_gpus``       gauge  GPUs above guaranteed + borrow limit, per
``{tenant,quota}``                                ``quota``: ``total`` (rows summed), ``any``
                                                  (the row for any GPU type) or a GPU type
``sharewise_tenant_borrowed_gpus{tenant}`` gauge  GPUs above the guarantee within the borrow limit
``sharewise_tenant_gpu_hours``             gauge  GPU-hours charged over the last 2 h and 24 h
``{tenant,window}``                               (``window``: ``7200s``, ``86400s``)
``sharewise_window_jain_index{window}``    gauge  the windowed fairness (docs/FAIRNESS.md §4)
``sharewise_gpus{state}``                  gauge  GPUs: total, schedulable, busy, shared
``sharewise_shared_gpu_fraction``          gauge  shared ÷ busy GPUs (0 when none is busy)
``sharewise_node_heartbeat_age_seconds``   gauge  seconds since each node's last heartbeat
``sharewise_node_up{node}``                gauge  1 if the node takes new jobs, else 0
=========================================  =====  ===========================================

A GPU is *busy* with at least one active placement and *shared* with two (Luo et al.,
IWQoS 2024: at most two jobs per GPU).
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from cluster.models import GPU, Job, Node, Placement, Tenant
from cluster.renderers import compact_json
from scheduling.models import Round
from scheduling.service.gpu_hours import DEFAULT_WINDOWS_S, usage_windows
from scheduling.service.metrics_access import metrics_allowed
from scheduling.service.over_quota import quota_use
from scheduling.service.silence import fleet_hearing, heartbeat_timeout_s
from scheduling.service.snapshot import node_takes_jobs


class SchedulerCollector(Collector):
    """Collects the metrics listed in the module docstring from the database."""

    def collect(self) -> Iterator[Metric]:
        yield from self._rounds()
        yield from self._jobs()
        yield from self._quotas()
        yield from self._windows()
        yield from self._gpus()
        yield from self._nodes()

    def _rounds(self) -> Iterator[Metric]:
        totals = Round.objects.aggregate(n=Count("id"), ms=Sum("duration_ms"))
        summary = SummaryMetricFamily(
            "sharewise_round_duration_seconds",
            "Duration of recorded scheduling rounds (snapshot, policy, persist)",
        )
        summary.add_metric([], count_value=totals["n"], sum_value=(totals["ms"] or 0.0) / 1e3)
        yield summary
        last = Round.objects.order_by("-id").values_list("duration_ms", "started_at").first()
        duration = GaugeMetricFamily(
            "sharewise_last_round_duration_seconds", "Duration of the latest recorded round"
        )
        when = GaugeMetricFamily(
            "sharewise_last_round_timestamp_seconds", "Start of the latest recorded round (POSIX time)"
        )
        if last is not None:
            duration.add_metric([], last[0] / 1e3)
            when.add_metric([], last[1].timestamp())
        yield duration
        yield when

    def _jobs(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "sharewise_jobs", "Pending and running jobs per tenant", labels=["tenant", "status"]
        )
        gpus = GaugeMetricFamily(
            "sharewise_gpus_in_use", "GPUs held by running jobs per tenant", labels=["tenant"]
        )
        counts = {
            (t, s): (n, g)
            for t, s, n, g in Job.objects.filter(status__in=Job.ACTIVE_STATUSES)
            .order_by()
            .values_list("tenant__name", "status")
            .annotate(n=Count("id"), g=Sum("gpus"))
            .values_list("tenant__name", "status", "n", "g")
        }
        for tenant in Tenant.objects.order_by("name").values_list("name", flat=True):
            for status in Job.ACTIVE_STATUSES:
                jobs.add_metric([tenant, status], counts.get((tenant, status), (0, 0))[0])
            gpus.add_metric([tenant], counts.get((tenant, Job.Status.RUNNING), (0, 0))[1] or 0)
        yield jobs
        yield gpus

    def _quotas(self) -> Iterator[Metric]:
        flag = GaugeMetricFamily(
            "sharewise_tenant_over_quota", "1 if the tenant holds GPUs above its quota", labels=["tenant"]
        )
        over = GaugeMetricFamily(
            "sharewise_tenant_over_quota_gpus",
            "GPUs held above guaranteed + borrow limit (quota: total, any, or a GPU type)",
            labels=["tenant", "quota"],
        )
        borrowed = GaugeMetricFamily(
            "sharewise_tenant_borrowed_gpus",
            "GPUs held above the guarantee within the borrow limit",
            labels=["tenant"],
        )
        names = dict(Tenant.objects.order_by("name").values_list("pk", "name"))
        use = quota_use(names)
        for t, name in names.items():
            flag.add_metric([name], 1 if use[t].over_quota else 0)
            over.add_metric([name, "total"], use[t].total.gpus_over_quota)
            for gpu_type, state in use[t].per_type.items():
                over.add_metric([name, gpu_type or "any"], state.gpus_over_quota)
            borrowed.add_metric([name], use[t].total.gpus_borrowed)
        yield flag
        yield over
        yield borrowed

    def _windows(self) -> Iterator[Metric]:
        hours = GaugeMetricFamily(
            "sharewise_tenant_gpu_hours",
            "GPU-hours charged to the tenant over the window ending now (a shared GPU split by "
            "normalised progress)",
            labels=["tenant", "window"],
        )
        jain = GaugeMetricFamily(
            "sharewise_window_jain_index",
            "Jain's index of GPU-hours / guaranteed GPUs over the demanding tenants, per window",
            labels=["window"],
        )
        names = dict(Tenant.objects.order_by("name").values_list("pk", "name"))
        usage = usage_windows(DEFAULT_WINDOWS_S, timezone.now(), names)
        for t, name in names.items():
            for w in usage.per_tenant[t]:
                hours.add_metric([name, f"{w.window_s}s"], w.gpu_hours)
        for f in usage.fairness:
            if f.jain_index is not None:
                jain.add_metric([f"{f.window_s}s"], f.jain_index)
        yield hours
        yield jain

    def _gpus(self) -> Iterator[Metric]:
        per_gpu = (
            Placement.objects.filter(active=True)
            .order_by()
            .values("gpu_id")
            .annotate(n=Count("id"))
            .values_list("n", flat=True)
        )
        loads = list(per_gpu)
        busy = len(loads)
        shared = sum(1 for n in loads if n >= 2)
        gpus = GaugeMetricFamily("sharewise_gpus", "GPUs by state", labels=["state"])
        gpus.add_metric(["total"], GPU.objects.count())
        gpus.add_metric(["schedulable"], GPU.objects.schedulable().count())
        gpus.add_metric(["busy"], busy)
        gpus.add_metric(["shared"], shared)
        yield gpus
        yield GaugeMetricFamily(
            "sharewise_shared_gpu_fraction",
            "Busy GPUs that hold two jobs (shared / busy; 0 when none is busy)",
            value=shared / busy if busy else 0.0,
        )

    def _nodes(self) -> Iterator[Metric]:
        now = timezone.now()
        timeout_s = heartbeat_timeout_s()
        hearing = fleet_hearing()
        age = GaugeMetricFamily(
            "sharewise_node_heartbeat_age_seconds",
            "Seconds since the node's agent last sent a heartbeat",
            labels=["node"],
        )
        up = GaugeMetricFamily("sharewise_node_up", "1 if the node takes new jobs", labels=["node"])
        for name, status, heartbeat, registered in Node.objects.order_by("name").values_list(
            "name", "status", "last_heartbeat", "created_at"
        ):
            if heartbeat is not None:
                age.add_metric([name], max(0.0, (now - heartbeat).total_seconds()))
            up.add_metric(
                [name], 1 if node_takes_jobs(status, heartbeat, now, timeout_s, registered, hearing) else 0
            )
        yield age
        yield up


registry = CollectorRegistry(auto_describe=False)
registry.register(SchedulerCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the Prometheus text exposition of :data:`registry`, for the scrapers
    :func:`~scheduling.service.metrics_access.metrics_allowed` lets in (403 for others)."""
    if not metrics_allowed(request):
        return compact_json(
            {"error": "metrics need 'Authorization: Bearer <SHAREWISE_METRICS_TOKEN>' or an allowed address"},
            status=403,
        )
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
