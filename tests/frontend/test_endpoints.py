"""Dashboard JSON endpoints: scoping (Alice and Bob see team-a, Charlie sees team-c, an admin sees
all), the numbers they show, empty states, bad parameters and authentication."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone

from cluster.models import GPU, Job, Node, Placement, Quota
from scheduling.figures import PALETTE, SHARED_LABEL
from scheduling.models import Round
from tests.frontend.conftest import gpu, make_job, place, session_client

NAMES = ("cluster-map", "timeline", "decisions", "learning", "fairness", "quota", "queue")


def get(client: Client, name: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"/dashboard/api/{name}.json", params)
    assert response.status_code == 200, response.content
    return response.json()


def text(payload: dict[str, Any]) -> str:
    return json.dumps(payload)


def table(payload: dict[str, Any], name: str) -> list[dict[str, Any]]:
    t = payload["tables"][name]
    return [dict(zip(t["columns"], row, strict=True)) for row in t["rows"]]


def record_round(jobs: dict[str, Job], waits: list[str]) -> Round:
    """A round that started a-train sharing node-00:0 with c-train (ξ 1.30 / 1.60, T_seq 1000 s,
    T_con 800 s) and left ``waits`` waiting, in that (policy) order."""
    a, c = jobs["a-train"], jobs["c-train"]
    gpu = GPU.objects.get(node__name="node-00", index=0)
    decisions = [
        {
            "job_id": c.pk,
            "action": "start",
            "gpu_ids": [gpu.pk],
            "gpus": ["node-00:0"],
            "sub_batch": 32,
            "accum_steps": 2,
            "shares": [],
            "reason": "fits alone",
        },
        {
            "job_id": a.pk,
            "action": "start",
            "gpu_ids": [gpu.pk],
            "gpus": ["node-00:0"],
            "sub_batch": 64,
            "accum_steps": 2,
            "shares": [
                {
                    "partner_id": c.pk,
                    "gpu_ids": [gpu.pk],
                    "xi_self": 1.3,
                    "xi_partner": 1.6,
                    "t_seq_s": 1000.0,
                    "t_con_s": 800.0,
                }
            ],
            "reason": f"T_con < T_seq with job {c.pk} of tenant team-c on tenant team-a's GPU",
        },
        *(
            {
                "job_id": jobs[w].pk,
                "action": "wait",
                "gpu_ids": [],
                "gpus": [],
                "sub_batch": None,
                "accum_steps": None,
                "shares": [],
                "reason": f"{w} has to wait" if w != "a-wait" else f"waits behind job {jobs['c-wait'].pk}",
            }
            for w in waits
        ),
    ]
    return Round.objects.create(
        policy="sjf-bsbf",
        duration_ms=12.0,
        n_started=2,
        n_waiting=len(waits),
        n_preempted=0,
        decisions=decisions,
        finished_at=timezone.now(),
    )


# ----------------------------------------------------------------------------- access
@pytest.mark.django_db
def test_anonymous_gets_401_json_and_the_page_redirects_to_login(client: Client) -> None:
    for name in NAMES:
        response = client.get(f"/dashboard/api/{name}.json")
        assert response.status_code == 401
        assert "log in" in response.json()["error"]
    page = client.get("/dashboard/")
    assert page.status_code == 302
    assert page["Location"].startswith("/dashboard/login/")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/dashboard/api/nothing.json", "/dashboard/api/queue.jsn", "/dashboard/api/", "/dashboard/api/a/b%0A"],
)
def test_an_unknown_endpoint_is_the_api_json_404(client: Client, alice_web: Client, path: str) -> None:
    """Like any path under /api/v1/ that names nothing: ``404 {"error": "not found"}``, JSON, for
    anyone (a typo must not answer Django's HTML page to a script)."""
    for caller in (client, alice_web):
        response = caller.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"error": "not found"}
    assert client.get("/api/v1/nothing/").json() == {"error": "not found"}  # the same body


@pytest.mark.django_db
def test_user_without_tenant_is_refused() -> None:
    loner = session_client(get_user_model().objects.create_user("dave"))
    assert loner.get("/dashboard/api/queue.json").status_code == 403
    assert loner.get("/dashboard/").status_code == 403


@pytest.mark.django_db
def test_login_form_with_password_opens_the_dashboard(alice: Any, cluster: list[Node]) -> None:
    alice.set_password("a-long-passphrase-7")
    alice.save()
    client = Client()
    wrong = client.post("/dashboard/login/", {"username": "alice", "password": "nope"})
    assert wrong.status_code == 200 and b"Wrong user name or password" in wrong.content
    response = client.post("/dashboard/login/", {"username": "alice", "password": "a-long-passphrase-7"})
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    page = client.get("/dashboard/")
    assert page.status_code == 200
    assert b"tenant team-a" in page.content


def test_bad_parameters_are_400_with_a_message(alice_web: Client) -> None:
    for name, query in (
        ("timeline", "window=abc"),
        ("timeline", "window=5"),
        ("queue", "limit=0"),
        ("decisions", "rounds=101"),
        ("fairness", "window=-1"),
    ):
        response = alice_web.get(f"/dashboard/api/{name}.json?{query}")
        assert response.status_code == 400, (name, query)
        assert "must be" in response.json()["error"]


@pytest.mark.parametrize(
    ("name", "param", "bounds"),
    [
        ("timeline", "window", "60 to 604800"),
        ("decisions", "rounds", "1 to 100"),
        ("queue", "limit", "1 to 1000"),
    ],
)
def test_an_empty_value_is_400_naming_the_parameter_as_the_rest_api_answers(
    alice_web: Client, name: str, param: str, bounds: str
) -> None:
    """``?window=`` used to mean the default here, while the REST API answers 400 for an empty
    number (``/api/v1/jobs/?limit=``: ``limit: must be a whole number from 1 to 500, got ''``).
    The page itself still falls back to the default for a bad value of its own query."""
    response = alice_web.get(f"/dashboard/api/{name}.json?{param}=")
    assert response.status_code == 400, response.content
    assert response.json() == {"error": f"{param} must be a whole number from {bounds}, got ''"}
    assert alice_web.get(f"/dashboard/?{param}=").status_code == 200


@pytest.mark.parametrize(
    ("name", "param", "values"),
    [
        ("learning", "window", ("300", "600")),
        ("timeline", "window", ("600", "600")),
        ("queue", "limit", ("5", "x")),
    ],
)
def test_a_parameter_given_twice_is_400_naming_it(
    alice_web: Client, name: str, param: str, values: tuple[str, str]
) -> None:
    """``?window=300&window=600`` used to be read as 600, silently; equal values too are refused."""
    response = alice_web.get(f"/dashboard/api/{name}.json?{param}={values[0]}&{param}={values[1]}")
    assert response.status_code == 400, response.content
    shown = ", ".join(v if v.isdigit() else repr(v) for v in values)
    assert response.json() == {"error": f"{param} given 2 times ({shown}); give it once"}


def test_page_loads_only_same_origin_scripts_and_styles(alice_web: Client) -> None:
    from django.contrib.staticfiles import finders

    page = alice_web.get("/dashboard/")
    html = page.content.decode()
    assert '<script src="/static/frontend/vendor/plotly.min.js"' in html
    assert "http://" not in html and "https://" not in html and "//cdn" not in html
    assert "connect-src 'self'" in page["Content-Security-Policy"]
    found = finders.find("frontend/vendor/plotly.min.js")
    assert found and found.endswith("plotly.min.js")


# ------------------------------------------------------------------------- cluster map
def test_cluster_map_scoping(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, bob_web: Client, charlie_web: Client
) -> None:
    a, c, solo = shared_cluster["a-train"], shared_cluster["c-train"], shared_cluster["a-solo"]
    admin = get(admin_web, "cluster-map")
    # 2 nodes × 4 GPUs; node-00:0 (shared), :1 and :2 (a-solo) in use → 3 in use, 5 free
    assert admin["summary"] == "2 nodes, 8 GPUs (8 healthy): 3 in use, 1 shared by two jobs, 5 free."
    rows = table(admin, "cluster_map")
    assert [(r["GPU"], r["job"], r["sub-batch"], r["shared"]) for r in rows] == [
        ("node-00:0", f"job {a.pk} a-train", 64, "yes"),
        ("node-00:0", f"job {c.pk} c-train", 32, "yes"),
        ("node-00:1", f"job {solo.pk} a-solo", 128, "no"),
        ("node-00:2", f"job {solo.pk} a-solo", 128, "no"),
    ]
    names = [t["name"] for t in admin["figures"]["cluster_map"]["data"]]
    assert names == ["team-a", "free", SHARED_LABEL]  # node-00:0's first job is team-a's
    # the shared mark's dot has the second job's tenant colour: team-c, second by name
    assert admin["figures"]["cluster_map"]["data"][2]["marker"]["color"] == [PALETTE[1]]
    for member in (alice_web, bob_web):
        body = get(member, "cluster-map")
        assert body["scope"] == "tenant team-a"
        assert "c-train" not in text(body) and "team-c" not in text(body)
        assert [(r["GPU"], r["job"], r["tenant"]) for r in table(body, "cluster_map")][:2] == [
            ("node-00:0", f"job {a.pk} a-train", "team-a"),
            ("node-00:0", "another tenant's job", "another tenant"),
        ]
    charlie = get(charlie_web, "cluster-map")
    assert "a-train" not in text(charlie) and "a-solo" not in text(charlie) and "team-a" not in text(charlie)
    assert [(r["GPU"], r["job"]) for r in table(charlie, "cluster_map")] == [
        ("node-00:0", "another tenant's job"),
        ("node-00:0", f"job {c.pk} c-train"),
        ("node-00:1", "another tenant's job"),
        ("node-00:2", "another tenant's job"),
    ]
    names = [t["name"] for t in charlie["figures"]["cluster_map"]["data"]]
    assert names == ["other tenants", "free", SHARED_LABEL]


def test_cluster_map_slowdowns_from_the_latest_round_else_the_profile(
    shared_cluster: dict[str, Job], admin_web: Client
) -> None:
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    # no round yet: ξ of resnet50 at 64 with vgg16 at 32, and the other way round, from the profile
    xi_a, xi_c = profile.type_slowdown(
        profile.job_type_for("resnet50", 64), profile.job_type_for("vgg16", 32)
    )
    rows = table(get(admin_web, "cluster-map"), "cluster_map")
    assert rows[0]["slowdown ξ"] == round(xi_a, 2) and rows[1]["slowdown ξ"] == round(xi_c, 2)
    assert xi_a >= 1 and xi_c >= 1
    assert rows[2]["slowdown ξ"] is None  # alone on its GPU
    record_round(shared_cluster, [])
    rows = table(get(admin_web, "cluster-map"), "cluster_map")
    assert (rows[0]["slowdown ξ"], rows[1]["slowdown ξ"]) == (1.3, 1.6)
    hover = get(admin_web, "cluster-map")["figures"]["cluster_map"]["data"][0]["text"][0]
    assert "sub-batch 64, slowdown ×1.30" in hover and "sub-batch 32, slowdown ×1.60" in hover


def test_cluster_map_marks_unhealthy_gpus(cluster: list[Node], admin_web: Client) -> None:
    GPU.objects.filter(node__name="node-01", index=3).update(healthy=False)
    body = get(admin_web, "cluster-map")
    # the unhealthy GPU takes no job: 7 free, not 8 (it was counted free before a trial noticed)
    assert body["summary"] == "2 nodes, 8 GPUs (7 healthy): 0 in use, 0 shared by two jobs, 7 free."
    unhealthy = [t for t in body["figures"]["cluster_map"]["data"] if t["name"] == "unhealthy"]
    assert unhealthy[0]["x"] == [3] and unhealthy[0]["y"] == ["node-01"]


@pytest.mark.django_db
def test_empty_states_without_gpus_jobs_or_rounds(tenant_a: Any, alice: Any) -> None:
    web = session_client(alice)
    assert "No GPUs registered yet" in get(web, "cluster-map")["empty"]
    assert get(web, "timeline")["empty"] == "No job held a GPU in the last 60 min."
    assert get(web, "decisions")["empty"] == "No scheduling round has run yet."
    assert get(web, "queue")["empty"] == "No job is waiting."
    fairness = get(web, "fairness")
    assert fairness["empty"] is None
    assert table(fairness, "tenants")[0]["succeeded jobs"] == 0
    assert "jct" not in fairness["figures"] and "queueing" not in fairness["figures"]  # no empty axes


# ---------------------------------------------------------------------------- timeline
def test_timeline_scoping_and_shared_intervals(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, charlie_web: Client
) -> None:
    admin = get(admin_web, "timeline")
    # both jobs on node-00:0 since the same instant, 5 min ago → one shared interval of 5.0 GPU-min
    assert admin["summary"].endswith("1 shared interval (5.0 GPU-min shared).")
    assert {r["GPU"] for r in table(admin, "timeline")} == {"node-00:0", "node-00:1", "node-00:2"}
    alice = get(alice_web, "timeline")
    assert "c-train" not in text(alice)
    assert sorted(r["job"] for r in table(alice, "timeline") if r["GPU"] == "node-00:0") == [
        "another tenant's job",
        f"job {shared_cluster['a-train'].pk} a-train",
    ]
    charlie = get(charlie_web, "timeline")
    # Charlie's job only used node-00:0: A's other GPUs are not on his timeline at all
    assert {r["GPU"] for r in table(charlie, "timeline")} == {"node-00:0"}
    assert "a-train" not in text(charlie) and "a-solo" not in text(charlie)


def test_timeline_window_excludes_older_placements(shared_cluster: dict[str, Job], admin_web: Client) -> None:
    # the placements began 5 min ago and are still active: a 2-min window still shows them, clipped
    body = get(admin_web, "timeline", window=120)
    bars = [b for t in body["figures"]["timeline"]["data"] if t["name"] == "team-a" for b in t["x"]]
    assert all(119_000 <= ms <= 121_000 for ms in bars)
    Job.objects.all().update(status=Job.Status.SUCCEEDED)
    shared_cluster["a-solo"].placements.update(active=False, ended_at=timezone.now() - timedelta(minutes=3))
    body = get(admin_web, "timeline", window=120)
    assert "a-solo" not in text(body)


# --------------------------------------------------------------------------- decisions
def test_decisions_scoping(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, charlie_web: Client
) -> None:
    a, c = shared_cluster["a-train"], shared_cluster["c-train"]
    record_round(shared_cluster, ["c-wait", "a-wait"])
    admin = get(admin_web, "decisions")
    shares = [r for r in table(admin, "decisions") if r["shares with"]]
    assert [
        (r["job"], r["shares with"], r["ξ self"], r["ξ partner"], r["T_seq s"], r["T_con s"], r["sub-batch"])
        for r in shares
    ] == [(f"job {a.pk} a-train", f"job {c.pk} c-train", 1.3, 1.6, 1000.0, 800.0, 64)]
    pairs = admin["figures"]["pairs"]["data"]
    assert pairs[0]["x"] == [1000.0] and pairs[1]["x"] == [800.0]
    assert [r["job"] for r in table(admin, "decisions") if r["action"] == "wait"] == [
        f"job {shared_cluster['c-wait'].pk} c-wait",
        f"job {shared_cluster['a-wait'].pk} a-wait",
    ]
    alice = get(alice_web, "decisions")
    assert "c-train" not in text(alice) and "c-wait" not in text(alice)
    assert [(r["job"], r["shares with"]) for r in table(alice, "decisions")] == [
        (f"job {a.pk} a-train", "another tenant's job"),
        (f"job {shared_cluster['a-wait'].pk} a-wait", ""),
    ]
    charlie = get(charlie_web, "decisions")
    assert "a-train" not in text(charlie) and "a-wait" not in text(charlie)
    assert [r["job"] for r in table(charlie, "decisions")] == [
        f"job {c.pk} c-train",
        f"job {shared_cluster['c-wait'].pk} c-wait",
    ]
    assert table(charlie, "round_counts")[0]["started"] == 2


# ----------------------------------------------------------------------------- fairness
def test_fairness_numbers_and_scoping(
    shared_cluster: dict[str, Job], tenant_a: Any, admin_web: Client, alice_web: Client, charlie_web: Client
) -> None:
    start = timezone.now() - timedelta(hours=2)
    make_job(
        tenant_a,
        "a-done",
        status=Job.Status.SUCCEEDED,
        submitted_at=start,
        started_at=start + timedelta(seconds=60),
        finished_at=start + timedelta(seconds=660),
    )
    admin = {r["tenant"]: r for r in table(get(admin_web, "fairness"), "tenants")}
    # team-a over the last 60 min: a-train ½ × 5 min on the shared GPU + a-solo 2 GPUs × 5 min
    # = 12.5 GPU-min = 0.208 GPU-h; team-c: ½ × 5 min = 2.5 GPU-min = 0.042 GPU-h
    assert admin["team-a"]["GPU-hours (60 min)"] == pytest.approx(12.5 / 60, abs=0.002)
    assert admin["team-c"]["GPU-hours (60 min)"] == pytest.approx(2.5 / 60, abs=0.002)
    assert admin["team-a"]["GPUs held now"] == 3 and admin["team-c"]["GPUs held now"] == 1  # gangs: 1 + 2, 1
    assert admin["team-a"]["guaranteed GPUs"] == 4 and admin["team-c"]["guaranteed GPUs"] == 2
    # fixtures: team-a may borrow 2, team-c without limit; both hold ≤ their guarantee: 3 ≤ 4, 1 ≤ 2
    assert admin["team-a"]["borrow limit"] == 2 and admin["team-c"]["borrow limit"] == "unlimited"
    assert admin["team-a"]["GPUs borrowed now"] == 0 and admin["team-c"]["GPUs borrowed now"] == 0
    # a-done, A's only succeeded job: JCT = finish − submit = 660 s (queueing delay: next test)
    assert admin["team-a"]["mean JCT s"] == 660.0 and admin["team-a"]["succeeded jobs"] == 1
    body = get(admin_web, "fairness")
    # last bin: A uses 0.5 + 2 = 2.5 GPUs of quota 4 (x=0.625), C 0.5 of 2 (x=0.25), both have work:
    # Jain = (0.875)² / (2 × (0.625² + 0.25²)) = 0.765625 / 0.90625 = 0.845
    assert body["figures"]["jain"]["data"][0]["y"][-1] == 0.845
    assert body["summary"].startswith("Jain's index now: 0.845")
    alice = get(alice_web, "fairness")
    assert [r["tenant"] for r in table(alice, "tenants")] == ["team-a"]
    assert "team-c" not in text(alice)
    charlie = get(charlie_web, "fairness")
    assert [r["tenant"] for r in table(charlie, "tenants")] == ["team-c"]
    assert "team-a" not in text(charlie)
    assert charlie["figures"]["jain"]["data"][0]["y"][-1] == 0.845  # cluster-wide, names nobody


def test_fairness_shows_borrowed_gpus_and_scheduler_settings(
    shared_cluster: dict[str, Job], tenant_c: Any, admin_web: Client, alice_web: Client, charlie_web: Client
) -> None:
    big = make_job(tenant_c, "c-big", gpus=3)
    for index in range(3):
        place(big, gpu("node-01", index))
    Quota.objects.create(tenant=tenant_c, guaranteed_gpus=1, borrow_limit=4, gpu_type="a100")
    with override_settings(
        SHAREWISE_STARVATION_BOUND_S=7200.0, SHAREWISE_RECLAIM="both", SHAREWISE_POLICY="sjf-bsbf-fair"
    ):
        admin, charlie, alice = (get(web, "fairness") for web in (admin_web, charlie_web, alice_web))
    with override_settings(SHAREWISE_RECLAIM="both", SHAREWISE_POLICY="sjf-bsbf"):
        plain = get(admin_web, "fairness")
    # sjf-bsbf never preempts: whatever the reclaim mode, its borrowers are time-bounded, and the
    # settings table says the same beside the mode that was set
    assert (
        "Policy sjf-bsbf; starvation bound 48 h; borrowed GPUs reclaimed by bounding borrowers' "
        "remaining time (sjf-bsbf never preempts, so SHAREWISE_RECLAIM=both does not apply)"
    ) in plain["summary"]
    plain_settings = {r["setting"]: r["value"] for r in table(plain, "scheduler")}
    assert plain_settings["reclaim (set)"] == "both"
    assert plain_settings["reclaim (in effect under sjf-bsbf)"] == "bound"
    # team-c's 4 GPUs held include GPU node-00:0 that c-train shares (a shared GPU counts per job)
    assert "GPUs held count a shared GPU once for each of its two jobs" in plain["summary"]
    c = {r["tenant"]: r for r in table(admin, "tenants")}["team-c"]
    # team-c: rows 2 (any type, no limit) + 1 (a100, limit 4) → 3 guaranteed, unlimited borrowing;
    # holds c-train 1 + c-big 3 = 4 GPUs, borrows 4 − 3 = 1
    assert (c["guaranteed GPUs"], c["borrow limit"], c["GPUs held now"], c["GPUs borrowed now"]) == (
        3,
        "unlimited",
        4,
        1,
    )
    assert table(charlie, "tenants") == [c]
    assert [r["tenant"] for r in table(alice, "tenants")] == ["team-a"]
    # cluster-wide settings, the same for every viewer: 7,200 s = 2 h
    for body in (admin, charlie, alice):
        assert (
            "Policy sjf-bsbf-fair; starvation bound 2 h; borrowed GPUs reclaimed by preemption and bounding"
        ) in body["summary"]
        settings_rows = {r["setting"]: r["value"] for r in table(body, "scheduler")}
        assert settings_rows == {
            "starvation bound s": 7200.0,
            "aging s": 3600.0,
            "reclaim (set)": "both",
            "reclaim (in effect under sjf-bsbf-fair)": "both",
            "borrow bound s": 3600.0,
        }


def test_mean_queueing_delay_is_submit_to_first_start(tenant_c: Any, admin_web: Client) -> None:
    start = timezone.now() - timedelta(hours=3)
    for i, wait in enumerate((30, 90)):
        make_job(
            tenant_c,
            f"c-{i}",
            status=Job.Status.SUCCEEDED,
            submitted_at=start,
            started_at=start + timedelta(seconds=wait),
            finished_at=start + timedelta(seconds=wait + 100),
        )
    row = {r["tenant"]: r for r in table(get(admin_web, "fairness"), "tenants")}["team-c"]
    assert row["mean queueing delay s"] == 60.0  # (30 + 90) / 2
    assert row["mean JCT s"] == 160.0  # (130 + 190) / 2


# -------------------------------------------------------------------------------- queue
def test_queue_order_scoping_and_wait(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client, bob_web: Client, charlie_web: Client
) -> None:
    a_wait, c_wait = shared_cluster["a-wait"], shared_cluster["c-wait"]
    # no round yet: arrival order (c-wait 20 min ago before a-wait 10 min ago)
    rows = table(get(admin_web, "queue"), "queue")
    assert [(r["position"], r["job"]) for r in rows] == [
        (1, f"job {c_wait.pk} c-wait"),
        (2, f"job {a_wait.pk} a-wait"),
    ]
    assert 1200 <= rows[0]["waiting s"] <= 1210 and 600 <= rows[1]["waiting s"] <= 610
    # the round's policy order puts a-wait first
    record_round(shared_cluster, ["a-wait", "c-wait"])
    rows = table(get(admin_web, "queue"), "queue")
    assert [(r["position"], r["job"], r["reason"]) for r in rows] == [
        (1, f"job {a_wait.pk} a-wait", f"waits behind job {c_wait.pk}"),
        (2, f"job {c_wait.pk} c-wait", "c-wait has to wait"),
    ]
    for member in (alice_web, bob_web):
        body = get(member, "queue")
        assert [(r["position"], r["job"]) for r in table(body, "queue")] == [(1, f"job {a_wait.pk} a-wait")]
        assert "c-wait" not in text(body)
    body = get(charlie_web, "queue")
    assert [(r["position"], r["job"]) for r in table(body, "queue")] == [(2, f"job {c_wait.pk} c-wait")]
    assert "a-wait" not in text(body)
    # a job submitted after the round comes after the round's order
    late = make_job(shared_cluster["c-wait"].tenant, "c-late")
    assert table(get(admin_web, "queue"), "queue")[-1]["job"] == f"job {late.pk} c-late"
    assert table(get(admin_web, "queue", limit=1), "queue")[0]["position"] == 1


def test_policy_order_takes_the_rounds_first_place_of_each_pending_job_then_arrivals() -> None:
    from datetime import UTC, datetime

    from frontend.payloads.queue_order import policy_order
    from frontend.payloads.rounds import RoundView
    from scheduling.round_waits import pack_waits

    waits = [(5, "behind 3"), (3, "no GPU"), (5, "not preempted"), (9, "gone"), (4, "no GPU")]
    meta = (1, datetime(2026, 1, 1, tzinfo=UTC), "sjf", 1.0, 0, len(waits), 0)
    latest = RoundView.of(meta, [], pack_waits(waits))
    assert latest.wait_order == (5, 3, 9, 4)  # each job once, at its first place
    # 9 and 4 no longer pending; 7 and 8 came since (8 submitted first); arrivals may list all
    assert policy_order({3, 5, 7, 8}, latest, [8, 7]) == [5, 3, 8, 7]
    assert policy_order({3: 1, 5: 1, 7: 2, 8: 2}, latest, [3, 8, 5, 7]) == [5, 3, 8, 7]
    assert policy_order({3, 5}, None, [3, 5]) == [3, 5]  # no round yet: arrival order


def test_plotly_js_is_served_from_the_package_and_collected_under_its_prefix() -> None:
    from frontend.staticfiles import PLOTLY_PATH, PlotlyFinder

    finder = PlotlyFinder()
    listed = list(finder.list([]))
    assert [(path, storage.prefix) for path, storage in listed] == [("plotly.min.js", "frontend/vendor")]
    assert finder.find(PLOTLY_PATH).endswith("package_data/plotly.min.js")
    assert finder.find("frontend/vendor/other.js") is None
    assert finder.check() == []


def test_logout_ends_the_session(alice_web: Client) -> None:
    assert alice_web.get("/dashboard/").status_code == 200
    response = alice_web.post("/dashboard/logout/")
    assert response.status_code == 302 and response["Location"] == "/dashboard/login/"
    assert alice_web.get("/dashboard/api/queue.json").status_code == 401


def test_reasons_name_no_other_tenant_or_its_jobs(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client
) -> None:
    a, c, c_wait = shared_cluster["a-train"], shared_cluster["c-train"], shared_cluster["c-wait"]
    record_round(shared_cluster, ["a-wait", "c-wait"])
    reasons = {r["job"]: r["reason"] for r in table(get(admin_web, "decisions"), "decisions")}
    assert (
        reasons[f"job {a.pk} a-train"]
        == f"T_con < T_seq with job {c.pk} of tenant team-c on tenant team-a's GPU"
    )
    reasons = {r["job"]: r["reason"] for r in table(get(alice_web, "decisions"), "decisions")}
    assert reasons[f"job {a.pk} a-train"] == (
        "T_con < T_seq with another tenant's job of another tenant on tenant team-a's GPU"
    )
    assert reasons[f"job {shared_cluster['a-wait'].pk} a-wait"] == "waits behind another tenant's job"
    queue = table(get(alice_web, "queue"), "queue")
    assert [r["reason"] for r in queue] == ["waits behind another tenant's job"]
    assert table(get(admin_web, "queue"), "queue")[0]["reason"] == f"waits behind job {c_wait.pk}"


def test_jain_counts_only_tenants_with_work_in_each_bin(
    tenant_a: Any, tenant_c: Any, admin_web: Client
) -> None:
    from tests.frontend.conftest import gpu, place

    now = timezone.now()
    # window = last 60 min in 30 bins of 120 s; t below = seconds after the window's start
    make_job(tenant_a, "a-queued", submitted_at=now - timedelta(minutes=49))  # pending from t=660 (bin 5)
    solo = make_job(tenant_a, "a-solo", gpus=2)
    place(solo, gpu("node-00", 0), since=now - timedelta(minutes=5))  # t=3300..3600
    place(solo, gpu("node-00", 1), since=now - timedelta(minutes=5))
    done = make_job(tenant_c, "c-done", submitted_at=now - timedelta(minutes=49))
    place(done, gpu("node-01", 0), since=now - timedelta(minutes=48))  # ran t=720..1200 on one GPU
    done.placements.update(active=False, ended_at=now - timedelta(minutes=40))
    Job.objects.filter(pk=done.pk).update(
        status=Job.Status.SUCCEEDED, finished_at=now - timedelta(minutes=40)
    )
    jain = get(admin_web, "fairness")["figures"]["jain"]["data"][0]["y"]
    assert jain[:5] == [None] * 5  # bins 0-4: nobody had a job yet
    # bin 7 (t=840..960): A waits (x = 0 GPUs / quota 4 = 0), C runs 1 GPU of quota 2 (x = 0.5):
    # (0 + 0.5)² / (2 × (0² + 0.5²)) = 0.25 / 0.5 = 0.5
    assert jain[7] == 0.5
    # last bin: C's job finished 40 min ago, so only A (2 GPUs of 4) has work: index 1
    assert jain[-1] == 1.0


def test_endpoints_only_read_the_database(
    shared_cluster: dict[str, Job], admin_web: Client, alice_web: Client
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    record_round(shared_cluster, ["a-wait", "c-wait"])
    for web in (admin_web, alice_web):
        for name in NAMES:
            with CaptureQueriesContext(connection) as queries:
                get(web, name)
            writes = [q["sql"] for q in queries if not q["sql"].lstrip().upper().startswith("SELECT")]
            assert queries and writes == [], (name, writes)


def test_fairness_survives_a_placement_that_ends_before_its_start(
    tenant_a: Any, tenant_c: Any, admin_web: Client
) -> None:
    # Two jobs share node-00:0; one placement row says it ended a minute before it began (a clock
    # step between the round that wrote it and the event that ended it). The dashboard used to
    # answer 500 (the sweep over the shared GPU removed a holder it had never added).
    now = timezone.now()
    a = make_job(tenant_a, "a-skewed")
    c = make_job(tenant_c, "c-sharing")
    skewed = place(a, gpu("node-00", 0), since=now - timedelta(minutes=10))
    Placement.objects.filter(pk=skewed.pk).update(active=False, ended_at=now - timedelta(minutes=11))
    place(c, gpu("node-00", 0), slot=1, since=now - timedelta(minutes=10))
    rows = {r["tenant"]: r for r in table(get(admin_web, "fairness"), "tenants")}
    # the skewed interval is empty and charges nothing; c alone holds the GPU for 10 min
    assert rows["team-a"]["GPU-hours (60 min)"] == 0.0
    assert rows["team-c"]["GPU-hours (60 min)"] == pytest.approx(10 / 60, abs=0.002)


#: ARABIC-INDIC DIGITS THREE, ZERO, ZERO
THREE_HUNDRED = "\u0663\u0660\u0660"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            f"window={THREE_HUNDRED}",
            f"window must be a whole number from 60 to 604800, got '{THREE_HUNDRED}'",
        ),
        ("window=%20300", "window must be a whole number from 60 to 604800, got ' 300'"),
        ("window=300%20", "window must be a whole number from 60 to 604800, got '300 '"),
        # bounded by its value (00300 is 300), but not read past 64 characters, saying so
        (
            "window=" + "0" * 65,
            "window is 65 characters long; a number here has at most 64, leading zeros included",
        ),
    ],
)
def test_the_dashboard_reads_ascii_digits_alone_as_the_rest_api_does(
    alice_web: Client, query: str, message: str
) -> None:
    """``int()`` read ``"\u0663\u0660\u0660"`` (Arabic-Indic 300) as 300 and ``" 300"`` too;
    ``/api/v1/jobs/?limit=`` answered 400 for both (``cluster.query_params.whole_number``)."""
    answer = alice_web.get(f"/dashboard/api/timeline.json?{query}")
    assert answer.status_code == 400
    assert answer.json() == {"error": message}


def test_the_dashboard_reads_a_zero_padded_number_as_its_value(alice_web: Client) -> None:
    """Before: more than 19 digits was a 400 whatever their value."""
    assert alice_web.get(f"/dashboard/api/timeline.json?window={'0' * 30}300").status_code == 200
