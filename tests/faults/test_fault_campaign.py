"""The short fault campaign CI runs (.ci/run: PostgreSQL and Redis): 12 faults at random moments
against the multi-process deployment on loopback, the invariants of TESTING.md checked after each.
The long one is ``python -m tests.faults.run`` (docs/HARDENING.md). Without PostgreSQL and Redis
it skips with the reason (fails under ``SHAREWISE_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from tests.faults.campaign import FAULTS, Campaign
from tests.faults.deployment import Deployment, with_redis_db
from tests.faults.proxy import CuttableProxy
from tests.integration.conftest import INTEGRATION_REDIS_DB, database_url, integration_redis_url

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

#: Faults of the short campaign: every kind at least once in a few minutes on 2 cores.
SHORT_FAULTS = 12


def test_a_short_fault_campaign_loses_no_job_and_breaks_no_invariant(
    redis_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = urlsplit(integration_redis_url(settings.REDIS_URL))
    proxy = CuttableProxy((target.hostname or "127.0.0.1", target.port or 6379))
    db = int(target.path.strip("/") or INTEGRATION_REDIS_DB)
    deployment = Deployment(
        database_url(), with_redis_db(target.geturl(), db, proxy.port), tmp_path / "t.json", tmp_path
    )
    campaign = Campaign(deployment, SHORT_FAULTS, seed=7, rate_per_s=1.0)
    # every kind of fault once, then random ones
    kinds = list(FAULTS)
    campaign.random.shuffle(kinds)
    plan = iter(kinds)
    choice = campaign.random.choice
    campaign.random.choice = lambda seq: next(plan, None) or choice(seq)  # type: ignore[method-assign]
    try:
        report = campaign.run(proxy)
    finally:
        proxy.close()
    with capsys.disabled():
        print("\n" + report.summary())
    assert report.faults_injected == SHORT_FAULTS and set(report.faults) == set(FAULTS)
    assert report.jobs_accepted > 20
    assert report.jobs_lost == 0 and report.jobs_succeeded == report.jobs_accepted
    assert report.breaks == []
    assert report.lost_rounds == 0 and report.rounds > 0
    assert report.server_errors == []
