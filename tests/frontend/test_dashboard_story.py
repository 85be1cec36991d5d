"""The dashboard tells one story: no fairness figure without jobs, and (in the demo) trace time
everywhere."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Job
from demo.database import record_trace_clock
from demo.live import Clock
from demo.report import live_result
from scheduling.models import Round
from tests.frontend.conftest import gpu, make_job, place
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


# ----------------------------------------------------------------------------- trace time
SPEEDUP = 50.0


@pytest.fixture
def replay(db: None) -> datetime:
    """A replay at 50x whose trace time 0 s was 100 wall seconds ago (its wall origin, returned)."""
    origin = timezone.now() - timedelta(seconds=100)
    record_trace_clock(SPEEDUP, 0.0, origin.timestamp(), "hand-built")
    return origin


def finished(tenant: Any, name: str, origin: datetime, submit_s: float, start_s: float, end_s: float) -> Job:
    """A succeeded job submitted, started and finished ``*_s`` wall seconds after ``origin``."""
    return make_job(
        tenant,
        name,
        status=Job.Status.SUCCEEDED,
        submitted_at=origin + timedelta(seconds=submit_s),
        started_at=origin + timedelta(seconds=start_s),
        finished_at=origin + timedelta(seconds=end_s),
    )


def test_fairness_in_a_replay_is_in_trace_seconds_and_matches_the_terminal(
    replay: datetime, tenant_a: Any, tenant_c: Any, admin_web: Client
) -> None:
    origin = replay
    # wall JCTs 40 s, 20 s (team-a) and 60 s (team-c); at 50x: 2,000, 1,000 and 3,000 trace s.
    # team-a: mean 1,500 s, queueing (4 + 6) / 2 = 5 wall s = 250 trace s; team-c: 3,000 s.
    # All three: (2,000 + 1,000 + 3,000) / 3 = 2,000 s.
    jobs = [
        finished(tenant_a, "a-1", origin, 1, 5, 41),
        finished(tenant_a, "a-2", origin, 2, 8, 22),
        finished(tenant_c, "c-1", origin, 3, 4, 63),
    ]
    body = get(admin_web, "fairness", window=86400)
    rows = {r["tenant"]: r for r in table(body, "tenants")}
    assert rows["team-a"]["mean JCT s"] == pytest.approx(1500.0, abs=0.1)
    assert rows["team-a"]["mean queueing delay s"] == pytest.approx(250.0, abs=0.1)
    assert rows["team-c"]["mean JCT s"] == pytest.approx(3000.0, abs=0.1)
    assert "Mean JCT of the 3 succeeded jobs: 2,000 s of trace time." in body["summary"]
    assert "trace time" in table_note(body, "tenants")
    assert "mean JCT (trace min)" in json.dumps(body["figures"]["jct"]["layout"])
    assert body["figures"]["jct"]["data"][0]["y"][0] == pytest.approx(25.0, abs=0.01)  # 1,500 s
    # the window (1 day of trace time = 1,728 wall s) begins at the replay's start, trace time 0,
    # not 1,628 wall s before it: 30 bins of (100 wall s × 50) / 30 = 166.7 trace s each
    usage = body["figures"]["usage"]
    assert usage["layout"]["xaxis"]["type"] == "linear"
    assert "trace time" in usage["layout"]["xaxis"]["title"]["text"]
    assert usage["data"][0]["x"][0] == 0.0
    span_s = (datetime.fromisoformat(body["generated_at"]) - origin).total_seconds() * SPEEDUP  # ≈ 5,000
    assert usage["data"][0]["x"][1] == pytest.approx(span_s / 30, abs=0.2)

    # the demo's terminal figure for the same jobs (demo.report.live_result on the same clock)
    clock = Clock(0.0, SPEEDUP)
    clock.epoch0 = origin.timestamp()
    run = SimpleNamespace(
        clock=clock,
        job_ids={j.pk: i for i, j in enumerate(jobs)},
        workload=SimpleNamespace(jobs=[SimpleNamespace(id=i) for i in range(3)]),
        config=SimpleNamespace(nodes=2, gpus_per_node=4),
    )
    terminal = live_result(run, "sjf-bsbf")  # type: ignore[arg-type]
    mean = sum(o.jct_s for o in terminal.outcomes) / len(terminal.outcomes)
    assert mean == pytest.approx(2000.0, abs=0.1)


def table_note(payload: dict[str, Any], name: str) -> str:
    return payload["tables"][name]["note"]


def test_timeline_decisions_and_queue_in_a_replay_are_in_trace_seconds(
    replay: datetime, tenant_a: Any, cluster: Any, admin_web: Client
) -> None:
    origin = replay
    job = make_job(tenant_a, "a-run")
    # on node-00:0 from 10 wall s after the origin: trace 500 s, still running (end = now, ~5,000)
    place(job, gpu("node-00", 0), since=origin + timedelta(seconds=10))
    body = get(admin_web, "timeline", window=86400)  # 1 day of trace time: since the origin
    (bar,) = table(body, "timeline")
    assert bar["start"] == 500.0
    # the end is the payload's now in trace time: (now − origin) × 50
    now_s = (datetime.fromisoformat(body["generated_at"]) - origin).total_seconds() * SPEEDUP
    # ("trace s" is rounded from the unrounded span, so it may differ by one from the rounded end's)
    assert bar["end"] == pytest.approx(now_s, abs=0.2) and abs(bar["trace s"] - (bar["end"] - 500.0)) <= 1
    spec = body["figures"]["timeline"]
    assert spec["layout"]["xaxis"]["type"] == "linear"
    assert spec["data"][0]["base"] == [500.0]
    assert spec["data"][0]["x"][0] == pytest.approx(bar["end"] - 500.0, abs=0.1)  # trace s, not ms

    # rounds 30 and 90 wall s after the origin: trace 1,500 s and 4,500 s, 3,000 s apart
    for at_s in (30, 90):
        Round.objects.create(
            started_at=origin + timedelta(seconds=at_s),
            policy="sjf-bsbf",
            decisions=[{"job_id": job.pk, "action": "wait", "reason": "needs 9 GPUs, 0 idle"}],
            n_waiting=1,
        )
    Job.objects.filter(pk=job.pk).update(status=Job.Status.PENDING)
    decisions = get(admin_web, "decisions", rounds=2)
    assert [r["round (trace s)"] for r in table(decisions, "decisions")] == [4500.0, 1500.0]
    assert decisions["figures"]["round_counts"]["data"][0]["x"] == [1500.0, 4500.0]
    assert "Latest round at 4,500 s of trace time" in decisions["summary"]
    assert "in the last 2 rounds (3,000 s of trace time)" in decisions["summary"]
    # a-run waits since its submission (now): about 0 s; a-old for 10 wall s = 500 trace s
    old = make_job(tenant_a, "a-old", submitted_at=timezone.now() - timedelta(seconds=10))
    body = get(admin_web, "queue")
    waited_s = (datetime.fromisoformat(body["generated_at"]) - old.submitted_at).total_seconds() * SPEEDUP
    queue = {r["job"].split()[-1]: r for r in table(body, "queue")}
    assert 500 <= queue["a-old"]["waiting trace s"] == pytest.approx(waited_s, abs=1)  # 10 s x 50 and a bit


# ----------------------------------------------------------------------------- the controls
def test_window_and_rounds_parameters_are_checked_with_a_message(alice_web: Client) -> None:
    for name, query, message in (
        ("decisions", "rounds=0", "rounds must be from 1 to 100, got 0"),
        ("decisions", "rounds=101", "rounds must be from 1 to 100, got 101"),
        ("decisions", "rounds=ten", "rounds must be a whole number from 1 to 100, got 'ten'"),
        ("fairness", "window=299", "window must be from 300 to 604800, got 299"),
        ("learning", "window=1.5", "window must be a whole number from 300 to 604800, got '1.5'"),
        ("timeline", "window=604801", "window must be from 60 to 604800, got 604801"),
    ):
        response = alice_web.get(f"/dashboard/api/{name}.json?{query}")
        assert response.status_code == 400, (name, query)
        assert response.json() == {"error": message}


def test_decisions_show_as_many_rounds_as_asked(shared_cluster: dict[str, Job], admin_web: Client) -> None:
    job = shared_cluster["a-wait"]
    now = timezone.now()
    for k in range(40):  # a round every 60 s over the last 40 minutes
        Round.objects.create(
            started_at=now - timedelta(seconds=60 * (40 - k)),
            policy="sjf-bsbf",
            decisions=[{"job_id": job.pk, "action": "wait", "reason": f"round {k}"}],
            n_waiting=1,
        )
    reasons = [r["reason"] for r in table(get(admin_web, "decisions"), "decisions")]
    assert reasons == [f"round {k}" for k in range(39, 29, -1)]  # the default: the last 10
    body = get(admin_web, "decisions", rounds=40)
    assert len(table(body, "decisions")) == 40
    assert "in the last 40 rounds (2,340 s)" in body["summary"]  # 39 intervals of 60 s
    assert len(body["figures"]["round_counts"]["data"][0]["x"]) == 40  # counts cover them too


def test_the_page_has_the_controls_set_from_its_query(alice_web: Client) -> None:
    html = alice_web.get("/dashboard/?window=86400&rounds=25").content.decode()
    assert '<select id="window-control" name="window">' in html
    assert '<option value="86400" selected>1 day</option>' in html
    assert 'id="rounds-control" name="rounds" min="1" max="100" value="25"' in html
    assert "Times: UTC, seconds" in html
    for section in ("timeline", "fairness", "learning"):
        assert f"{{% url 'frontend:{section}' %}}" not in html
        assert f'id="{section}" data-endpoint="/dashboard/api/{section}.json" data-params="window"' in html
    assert 'data-endpoint="/dashboard/api/decisions.json" data-params="rounds"' in html
    bad = alice_web.get("/dashboard/?window=7&rounds=x").content.decode()  # the defaults, no error
    assert '<option value="3600" selected>1 h</option>' in bad and 'value="10"' in bad


def test_the_page_says_trace_time_in_a_replay(replay: datetime, alice_web: Client) -> None:
    html = alice_web.get("/dashboard/").content.decode()
    assert "Times: trace time in seconds (a replay at 50x)" in html
    assert '<option value="86400" selected>1 day</option>' in html  # the whole demo by default
