"""The dashboard tells one story: no fairness figure without jobs, and (in the demo) trace time
everywhere."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.frontend.conftest import make_job
from tests.frontend.test_endpoints import get, table


def test_no_jains_index_without_jobs(tenant_a: Any, tenant_c: Any, admin_web: Client) -> None:
    body = get(admin_web, "fairness")
    assert body["summary"].startswith("Jain's index now: — (no jobs yet);")
    assert "jain" not in body["figures"]  # no chart of nothing
    assert {row["Jain's index"] for row in table(body, "usage")} == {None}


def test_no_jains_index_while_no_tenant_with_work_holds_a_gpu(
    tenant_a: Any, tenant_c: Any, admin_web: Client
) -> None:
    # both tenants wait, nobody runs: x = 0 for both, which jain_index calls 1.0 ("all equal")
    make_job(tenant_a, "a-wait")
    make_job(tenant_c, "c-wait")
    body = get(admin_web, "fairness")
    assert body["summary"].startswith("Jain's index now: — (no tenant with a quota and work held a GPU);")
    assert "jain" not in body["figures"]
