"""Who sees what of other tenants: the API and the dashboard name another tenant's jobs "another
tenant's job" and its name "another tenant" (:class:`Viewer`, :class:`JobNames`), so the policy's
reasons ("waits behind job 12", "tenant team-a's guarantee") can be shown to every member."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import F

from cluster.compiled import meta
from cluster.expressions import AnyOf
from cluster.models import Job, Membership, Tenant

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
    with connection.cursor() as cursor:
        cursor.execute(_membership_sql(), [user.pk])
        row = cursor.fetchone()  # at most one: a user belongs to at most one tenant
    return None if row is None else Viewer(row[0], row[1])


@cache
def _membership_sql() -> str:
    """``SELECT tenant id, tenant name`` of the membership of user ``%s``: one plain statement
    (every dashboard poll of a member asks; the ORM's compilation of the join cost more CPU than
    the database took to answer it, docs/PERFORMANCE.md §6)."""
    q = connection.ops.quote_name
    member, tenant = meta(Membership), meta(Tenant)
    tenant_col, user_col = member.get_field("tenant").column, member.get_field("user").column
    return (
        f"SELECT m.{q(tenant_col)}, t.{q(tenant.get_field('name').column)} "
        f"FROM {q(member.db_table)} m JOIN {q(tenant.db_table)} t "
        f"ON t.{q(tenant.pk.column)} = m.{q(tenant_col)} "
        f"WHERE m.{q(user_col)} = %s"
    )


def job_label(job_id: int, name: str) -> str:
    """How a visible job is named on every chart and table: ``job ID NAME``."""
    return f"job {job_id} {name}"


_JOB_REF = re.compile(r"\bjob (\d+)\b")
_TENANT_REF = re.compile(r"\btenant ([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)")


def cited_jobs(texts: Iterable[str]) -> set[int]:
    """Ids of the jobs the policy's reasons ``texts`` cite ("waits behind job 12")."""
    return {int(m) for text in texts for m in _JOB_REF.findall(text)}


class JobNames:
    """Job id → (name, tenant id, tenant name), looked up in batches and remembered."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[str, int | None, str]] = {}

    def load(self, ids: Iterable[int]) -> None:
        """Look up the jobs of ``ids`` not known yet (500 per query)."""
        wanted = [j for j in set(ids) if j not in self.known]
        for i in range(0, len(wanted), 500):
            # AnyOf: the ids as one array parameter on PostgreSQL (Django's __in binds each)
            chunk = AnyOf(F("pk"), wanted[i : i + 500])
            for j, name, tenant_id, tenant in Job.objects.filter(chunk).values_list(
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
        self.load(cited_jobs(texts))

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
