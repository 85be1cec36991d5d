"""The API of closed-loop sharing: the job field ``sharing`` and the tenant's default, the iteration
time the scheduler uses and its source, the predicted and measured slowdown of a running job, the
admin endpoints of learned slowdowns and incompatible pairs, and what the agents may report.

Cluster fixture: node-00 and node-01, four 16,000 MB V100s each; Alice (team-a), Charlie (team-c).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from cluster.models import Job, Node, Sharing, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.core.learning import PRIOR_SIGMA, SampleStats
from scheduling.models import IncompatiblePair, LearnedSlowdown
from scheduling.profiles import load_default_profile
from tests.api.conftest import JOBS_URL, job_body

SLOWDOWNS_URL = "/api/v1/admin/slowdowns/"
PAIRS_URL = "/api/v1/admin/incompatible-pairs/"


@pytest.fixture
def sent() -> Iterator[list[dict[str, Any]]]:
    """Messages dispatched in-process (the rounds' after-commit dispatch)."""
    messages: list[dict[str, Any]] = []
    service.set_dispatcher(messages.extend)
    yield messages
    service.set_dispatcher(None)


def agent_client(node: Node) -> APIClient:
    """An agent client of ``node`` (a fresh token is issued)."""
    token = node.issue_agent_token()
    node.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {token}")
    return client


class Place:
    """A policy that starts one job on core GPU 0 at its full batch."""

    name, preemptive = "fixed", False

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id

    def decide(self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True) -> Any:
        job = next(j for j in snapshot.pending if j.id == self.job_id)
        start = core.Start(job.id, (0,), job.batch_size, 1)
        return core.RoundDecisions(self.name, snapshot.now, (start,), (), ())


def place(capture: Callable, job_id: int) -> None:
    with capture(execute=True):
        service.run_round(policy=Place(job_id))


# ------------------------------------------------------------------------------------- sharing


def test_sharing_defaults_to_the_tenants_and_may_say_never(
    alice_api: APIClient, staff_api: APIClient, tenant_a: Tenant
) -> None:
    assert alice_api.post(JOBS_URL, job_body(name="plain"), format="json").json()["sharing"] == "allowed"
    never = alice_api.post(JOBS_URL, job_body(name="alone", sharing="never"), format="json")
    assert never.status_code == 201 and never.json()["sharing"] == "never"
    assert Job.objects.get(pk=never.json()["id"]).sharing == Sharing.NEVER
    # an admin sets the tenant's default; the tenant sees it and its new jobs take it
    changed = staff_api.patch(
        f"/api/v1/admin/tenants/{tenant_a.pk}/", {"default_sharing": "never"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["default_sharing"] == "never"
    assert alice_api.get("/api/v1/tenant/").json()["default_sharing"] == "never"
    assert alice_api.post(JOBS_URL, job_body(name="later"), format="json").json()["sharing"] == "never"
    allowed = alice_api.post(JOBS_URL, job_body(name="opt-in", sharing="allowed"), format="json")
    assert allowed.json()["sharing"] == "allowed"


def test_bad_sharing_values_are_refused(alice_api: APIClient, staff_api: APIClient, tenant_a: Tenant) -> None:
    for bad in ("sometimes", 1, True, None):
        response = alice_api.post(JOBS_URL, job_body(sharing=bad), format="json")
        assert response.status_code == 400, bad
        assert "sharing" in response.json()["fields"] and response.json()["error"].startswith(
            "invalid input: sharing"
        )
    assert not Job.objects.exists()
    patched = staff_api.patch(
        f"/api/v1/admin/tenants/{tenant_a.pk}/", {"default_sharing": "rarely"}, format="json"
    )
    assert (
        patched.status_code == 400
        and '"rarely" is not a valid choice.' in patched.json()["fields"]["default_sharing"]
    )
    # the tenant cannot change its own default (the tenant endpoint only reads)
    assert alice_api.patch("/api/v1/tenant/", {"default_sharing": "never"}, format="json").status_code == 405


# ------------------------------------------------------------------------------ iteration time


def test_the_iteration_time_the_scheduler_uses_and_its_source(
    alice_api: APIClient, cluster: list[Node], sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    declared = alice_api.post(JOBS_URL, job_body(name="declared", iteration_time_s=0.5), format="json").json()
    assert (declared["scheduler_iteration_time_s"], declared["iteration_time_source"]) == (0.5, "declared")
    profiled = alice_api.post(JOBS_URL, job_body(name="profiled"), format="json").json()
    # ResNet-50 at batch 128 on 2 GPUs: the profile's 4.223 steps/s → 1 / 4.223 s per iteration
    assert profiled["iteration_time_source"] == "profile"
    assert profiled["scheduler_iteration_time_s"] == pytest.approx(1 / 4.223)
    # the job runs alone and its agent measures 0.8 s per iteration at its full batch
    place(django_capture_on_commit_callbacks, declared["id"])
    body = {"generation": 1, "event": "progress", "iterations_done": 10, "iter_time_s": 0.8}
    node = Node.objects.get(name="node-00")
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            agent_client(node)
            .post(f"/api/v1/agent/jobs/{declared['id']}/events/", body, format="json")
            .status_code
            == 200
        )
    seen = alice_api.get(f"{JOBS_URL}{declared['id']}/").json()
    assert (seen["scheduler_iteration_time_s"], seen["iteration_time_source"]) == (0.8, "measured")
    listed = {j["id"]: j for j in alice_api.get(JOBS_URL).json()["results"]}
    assert listed[declared["id"]]["iteration_time_source"] == "measured"
    assert listed[profiled["id"]]["iteration_time_source"] == "profile"


def test_a_running_jobs_predicted_and_measured_slowdown(
    alice_api: APIClient,
    charlie_api: APIClient,
    cluster: list[Node],
    sent: list,
    django_capture_on_commit_callbacks: Callable,
) -> None:
    capture = django_capture_on_commit_callbacks
    body = {"model": "resnet18", "gpus": 1, "iteration_time_s": 0.5}
    first = alice_api.post(JOBS_URL, job_body(name="first", **body), format="json").json()
    place(capture, first["id"])
    alone = alice_api.get(f"{JOBS_URL}{first['id']}/").json()
    assert (alone["predicted_slowdown"], alone["measured_slowdown"]) == (None, None)
    assert alone["placement"][0]["shared"] is False
    second = alice_api.post(JOBS_URL, job_body(name="second", **body), format="json").json()
    place(capture, second["id"])
    table = load_default_profile()
    probe = core.Job(0, "", "resnet18", 128, 1, 1, 0.0, 0.5)
    xi = table.slowdown(probe, 128, probe, 128)[0]
    shared = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert (shared["predicted_slowdown"], shared["measured_slowdown"]) == (xi, None)
    assert shared["placement"][0] | {"gpu_uuid": ""} == {
        "node": "node-00",
        "gpu_index": 0,
        "gpu_uuid": "",
        "slot": 1,
        "sub_batch": 128,
        "generation": 1,
        "shared": True,
        "predicted_slowdown": xi,
        "measured_slowdown": None,
        "partner": f"job {first['id']} first",  # the job sharing the GPU (another tenant's: unnamed)
    }
    event = {"generation": 1, "event": "progress", "iterations_done": 5, "iter_time_s": 0.7}
    with capture(execute=True):
        agent_client(cluster[0]).post(f"/api/v1/agent/jobs/{second['id']}/events/", event, format="json")
    measured = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert measured["measured_slowdown"] == pytest.approx(0.7 / 0.5)  # ξ = measured / exclusive = 1.4
    assert charlie_api.get(f"{JOBS_URL}{second['id']}/").status_code == 404  # another tenant's job


# ------------------------------------------------------------------------------ admin endpoints


def test_admin_lists_learned_slowdowns_with_prior_and_posterior(
    staff_api: APIClient, alice_api: APIClient
) -> None:
    row = LearnedSlowdown(model_a="vgg19", sub_a=16, model_b="resnet18", sub_b=128, updated_at=timezone.now())
    row.set_stats(SampleStats().add(1.5))
    row.save()
    LearnedSlowdown.objects.create(model_a="bert", sub_a=4, model_b="gpt2", sub_b=4)  # no sample: not listed
    listed = staff_api.get(SLOWDOWNS_URL)
    assert listed.status_code == 200 and listed.json()["count"] == 1
    entry = listed.json()["results"][0]
    table = load_default_profile()
    vgg, resnet = (
        core.Job(0, "", "vgg19", 16, 1, 1, 0.0, 1.0),
        core.Job(0, "", "resnet18", 128, 1, 1, 0.0, 1.0),
    )
    prior = table.slowdown(vgg, 16, resnet, 128)[0]
    source = table.slowdown_source(vgg, 16, resnet, 128)
    # one sample: spread 0, so σ_o = 0.05; ln ξ̂ = (ln p/σ_p² + ln 1.5/σ_o²) / (1/σ_p² + 1/σ_o²)
    sp, so = PRIOR_SIGMA[source] ** 2, 0.05**2
    posterior = math.exp((math.log(prior) / sp + math.log(1.5) / so) / (1 / sp + 1 / so))
    assert entry["count"] == 1 and entry["mean"] == pytest.approx(1.5) and entry["spread"] == 0.0
    assert (entry["prior"], entry["prior_source"]) == (prior, source)
    assert entry["posterior"] == pytest.approx(posterior)
    assert (entry["model_a"], entry["sub_a"], entry["model_b"], entry["sub_b"]) == (
        "vgg19",
        16,
        "resnet18",
        128,
    )
    assert alice_api.get(SLOWDOWNS_URL).status_code == 403  # tenants may not
    assert APIClient().get(SLOWDOWNS_URL).status_code == 401


def test_admin_lists_incompatible_pairs(staff_api: APIClient, alice_api: APIClient) -> None:
    IncompatiblePair.objects.create(
        model_a="resnet18",
        sub_a=128,
        model_b="vgg19",
        sub_b=16,
        job=3,
        partner=4,
        reason="CUDA out of memory",
    )
    listed = staff_api.get(PAIRS_URL).json()
    assert listed["count"] == 1
    assert {k: listed["results"][0][k] for k in ("model_a", "sub_b", "job", "partner", "reason")} == {
        "model_a": "resnet18",
        "sub_b": 16,
        "job": 3,
        "partner": 4,
        "reason": "CUDA out of memory",
    }
    assert alice_api.get(PAIRS_URL).status_code == 403


# ------------------------------------------------------------------------------- agent reports


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("failure_kind", "segfault", '"segfault" is not a valid choice.'),
        ("memory_mb", -1, "must be a positive number of MB or null"),
        ("memory_mb", "3000", "A valid number is required."),
        ("memory_mb", 2_000_000, "Ensure this value is less than or equal to 1048576."),
    ],
)
def test_bad_learning_fields_of_an_agent_event_are_refused(
    cluster: list[Node], field: str, value: Any, message: str
) -> None:
    body = {"generation": 1, "event": "progress", "iterations_done": 1, field: value}
    response = agent_client(cluster[0]).post("/api/v1/agent/jobs/1/events/", body, format="json")
    assert response.status_code == 400 and response.json()["fields"] == {field: [message]}


def test_the_django_admin_lists_what_was_learned(db: None) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    LearnedSlowdown.objects.create(model_a="vgg19", sub_a=16, model_b="resnet18", sub_b=128, count=1)
    web = Client()
    web.force_login(get_user_model().objects.create_superuser("root", "", "pw-for-the-test"))
    for name in (
        "learnedslowdown",
        "learneditertime",
        "jobitertime",
        "incompatiblepair",
        "slowdownobservation",
    ):
        page = web.get(f"/admin/scheduling/{name}/")
        assert page.status_code == 200, name
    assert web.get("/admin/scheduling/learnedslowdown/add/").status_code == 403  # written by reports only
