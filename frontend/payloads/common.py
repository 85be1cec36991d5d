"""What every dashboard payload shares: who is looking (:class:`Viewer`), the body and its tables
(:func:`payload`, :func:`table`), job labels and their redaction (:class:`JobNames`, defined in
:mod:`cluster.visibility`), and the raw queries the endpoints build on (:func:`raw_rows`,
:func:`placements_in_window`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Q

from cluster.compiled import kept_rows
from cluster.models import Placement, Tenant

# The redaction of other tenants' jobs lives beside the API that shares it; these names stay
# importable from here for the dashboard's payload modules.
from cluster.visibility import HIDDEN as HIDDEN
from cluster.visibility import JobNames as JobNames
from cluster.visibility import Viewer as Viewer
from cluster.visibility import cited_jobs as cited_jobs
from cluster.visibility import job_label as job_label
from cluster.visibility import viewer_of as viewer_of


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


def visible_tenants(viewer: Viewer) -> list[str]:
    """Names of the tenants ``viewer`` sees, in name order (the order that fixes their colours)."""
    if viewer.is_admin:
        return [name for (name,) in kept_rows(_tenant_names)]
    return [viewer.tenant_name]


def _tenant_names() -> Any:
    """Every tenant's name, in name order (a queryset, :func:`cluster.compiled.kept_rows`)."""
    return Tenant.objects.order_by("name").values_list("name")


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
