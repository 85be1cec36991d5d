"""``kept_rows``: the SQL is kept, never the rows — a tenant added, renamed or deleted after the
first read is seen by the next one, and the rows are those of the ORM's own read."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.compiled import kept_rows
from cluster.models import Tenant
from cluster.visibility import Viewer
from frontend.payloads.common import visible_tenants

pytestmark = pytest.mark.django_db


def names_and_ids() -> Any:
    return Tenant.objects.order_by("name").values_list("name", "id")


def test_the_rows_are_read_again_every_time() -> None:
    assert kept_rows(names_and_ids) == []
    a = Tenant.objects.create(name="team-b")
    assert kept_rows(names_and_ids) == [("team-b", a.pk)]
    c = Tenant.objects.create(name="team-a")
    assert kept_rows(names_and_ids) == [("team-a", c.pk), ("team-b", a.pk)]
    Tenant.objects.filter(pk=a.pk).update(name="team-0")
    c.delete()
    assert kept_rows(names_and_ids) == [("team-0", a.pk)]
    assert kept_rows(names_and_ids) == list(names_and_ids())


def test_an_admin_sees_every_tenant_by_name() -> None:
    for name in ("zeta", "alpha", "mu"):
        Tenant.objects.create(name=name)
    assert visible_tenants(Viewer()) == ["alpha", "mu", "zeta"]
    Tenant.objects.create(name="beta")
    assert visible_tenants(Viewer()) == ["alpha", "beta", "mu", "zeta"]
    assert visible_tenants(Viewer(1, "mu")) == ["mu"]
