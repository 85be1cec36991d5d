"""What every dashboard payload shares: who is looking (:class:`Viewer`), the body and its tables
(:func:`payload`, :func:`table`), job labels and their redaction (:class:`JobNames`), and the
raw queries the endpoints build on (:func:`raw_rows`, :func:`placements_in_window`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Q

from cluster.models import Job, Membership, Placement, Tenant

#: How a job of another tenant is named to a tenant's member.
HIDDEN = "another tenant's job"


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: a cluster admin (``tenant_id`` ``None``) or a member of one tenant."""

    tenant_id: int | None = None
    tenant_name: str = ""

    @property
    def is_admin(self) -> bool:
        """Whether the viewer sees the whole cluster."""
        return self.tenant_id is None

    @property
    def scope(self) -> str:
        """``cluster`` for an admin, ``tenant NAME`` for a member."""
        return "cluster" if self.is_admin else f"tenant {self.tenant_name}"

    def sees(self, tenant_id: int | None) -> bool:
        """Whether jobs of ``tenant_id`` are shown to this viewer by name."""
        return self.is_admin or tenant_id == self.tenant_id


def viewer_of(user: Any) -> Viewer | None:
    """The :class:`Viewer` for a logged-in ``user``: staff → admin, a member → their tenant;
    ``None`` for anyone else (anonymous, or a user in no tenant)."""
    if not (user and user.is_authenticated):
        return None
    if user.is_staff:
        return Viewer()
    try:
        membership = Membership.objects.select_related("tenant").get(user=user)
    except Membership.DoesNotExist:
        return None
    return Viewer(membership.tenant_id, membership.tenant.name)


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with milliseconds (what Plotly's date axes parse)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def payload(
    viewer: Viewer,
    now: datetime,
    *,
    empty: str | None = None,
    summary: str = "",
    figures_: Mapping[str, Any] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of an endpoint (shape in :mod:`frontend.payloads`), generated at ``now``.

    ``empty``: why there is nothing to show (then no figures or tables); ``figures_``: ``{name:
    Plotly spec}``; ``tables``: ``{name: table(...)}``.
    """
    return {
        "scope": viewer.scope,
        "generated_at": iso(now),
        "empty": empty,
        "summary": summary,
        "figures": dict(figures_ or {}),
        "tables": dict(tables or {}),
    }


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], note: str = "") -> dict[str, Any]:
    """A table of a body: ``{"columns": [str], "rows": [[cell]], "note": str}``."""
    return {"columns": list(columns), "rows": [list(r) for r in rows], "note": note}


def rounded(value: float | None, digits: int = 2) -> float | None:
    """``value`` to ``digits`` decimals; ``None`` for ``None``, NaN or ±∞ (JSON has no NaN)."""
    return None if value is None or not math.isfinite(value) else round(value, digits)


def job_label(job_id: int, name: str) -> str:
    """How a visible job is named on every chart and table: ``job ID NAME``."""
    return f"job {job_id} {name}"


def visible_tenants(viewer: Viewer) -> list[str]:
    """Names of the tenants ``viewer`` sees, in name order (the order that fixes their colours)."""
    if viewer.is_admin:
        return list(Tenant.objects.order_by("name").values_list("name", flat=True))
    return [viewer.tenant_name]


def raw_rows(queryset: Any) -> list[tuple]:
    """The rows of a ``values_list`` queryset without Django's per-row conversion (ints, floats,
    strings; booleans as 0/1 on SQLite). Annotations must come last in ``values_list``: that is
    their place in the SQL."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def placements_in_window(start: datetime, now: datetime) -> Any:
    """Placements that held a GPU at some time in ``[start, now]`` (a queryset)."""
    return Placement.objects.filter(created_at__lt=now).filter(
        Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=start)
    )


_JOB_REF = re.compile(r"\bjob (\d+)\b")
_TENANT_REF = re.compile(r"\btenant ([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)")


class JobNames:
    """Job id → (name, tenant id, tenant name), looked up in batches and remembered."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[str, int | None, str]] = {}

    def load(self, ids: Iterable[int]) -> None:
        """Look up the jobs of ``ids`` not known yet (500 per query)."""
        wanted = [j for j in set(ids) if j not in self.known]
        for i in range(0, len(wanted), 500):
            for j, name, tenant_id, tenant in Job.objects.filter(id__in=wanted[i : i + 500]).values_list(
                "id", "name", "tenant_id", "tenant__name"
            ):
                self.known[j] = (name, tenant_id, tenant)

    def redact(self, texts: Sequence[str], viewer: Viewer) -> list[str]:
        """``texts`` (the policy's reasons) with every job of another tenant named "another
        tenant's job" and every other tenant "another tenant"; unchanged for an admin.

        Reasons cite jobs by id ("waits behind job 12", "job 26 on GPUs 13,14") and tenants by
        name ("tenant team-a's guarantee").
        """
        if viewer.is_admin:
            return list(texts)
        self.load(int(m) for text in texts for m in _JOB_REF.findall(text))

        def job(match: re.Match[str]) -> str:
            return match.group(0) if self.label(int(match.group(1)), viewer)[2] else HIDDEN

        def tenant(match: re.Match[str]) -> str:
            return match.group(0) if match.group(1) == viewer.tenant_name else "another tenant"

        return [_TENANT_REF.sub(tenant, _JOB_REF.sub(job, text)) for text in texts]

    def label(self, job_id: int, viewer: Viewer) -> tuple[str, str, bool]:
        """``(label, tenant, visible)`` of a job as ``viewer`` may see it (a job not loaded or
        deleted is ``job ID (deleted)`` to an admin and hidden from a member)."""
        name, tenant_id, tenant = self.known.get(job_id, ("(deleted)", None, ""))
        if viewer.sees(tenant_id):
            return job_label(job_id, name), tenant, True
        return HIDDEN, "another tenant", False
