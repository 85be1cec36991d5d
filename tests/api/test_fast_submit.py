"""The plain submission view (``cluster/fast_submit.py``) answers exactly as DRF's view does: the
same validated fields as the serializer for every body it takes, the same status, headers and
body for every outcome it answers itself, and DRF's own answer for everything else."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from cluster import cluster_facts, fast_submit, views
from cluster.models import Job
from cluster.serializers import JobSerializer
from cluster.throttles import SubmissionThrottle
from tests.api.conftest import JOBS_URL, job_body, rest_settings

#: Headers whose values differ between two otherwise equal answers (the job's id and its length).
VARYING = {"Location", "Content-Length"}
ABSENT = object()


@pytest.fixture
def drf_creates(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the submissions DRF's view answered (one entry each)."""
    calls: list[int] = []
    create = views.JobViewSet.create

    def counted(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return create(self, request, *args, **kwargs)

    monkeypatch.setattr(views.JobViewSet, "create", counted)
    return calls


def test_a_plain_submission_and_every_optional_field_are_answered_without_drf(
    alice_api: APIClient, drf_creates: list[int]
) -> None:
    body = job_body(
        gpu_memory_mb=8000,
        iteration_time_s=0.25,
        command="python train.py --epochs 2",
        priority=5,
        sharing="never",
        gpu_types=[],
    )
    for sent in (job_body(), body):
        response = alice_api.post(JOBS_URL, sent, format="json")
        assert response.status_code == 201, response.content
    assert drf_creates == []
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.gpu_memory_mb, job.iteration_time_s, job.command) == (
        8000,
        0.25,
        "python train.py --epochs 2",
    )
    assert (job.priority, job.sharing, job.gpu_types) == (5, "never", [])


def test_what_the_plain_view_does_not_take_is_drfs(alice_api: APIClient, drf_creates: list[int]) -> None:
    """GPU types (a database check), a refused field, an ``Accept`` with parameters, a query string
    and a request without a token each go to DRF, which answers with its own status."""
    assert alice_api.post(JOBS_URL, job_body(gpu_types=["v100"]), format="json").status_code == 201
    assert alice_api.post(JOBS_URL, job_body(gpus=9), format="json").status_code == 400
    indented = alice_api.post(JOBS_URL, job_body(), format="json", HTTP_ACCEPT="application/json; indent=2")
    assert indented.status_code == 201 and indented.content.startswith(b"{\n  ")
    assert alice_api.post(f"{JOBS_URL}?format=json", job_body(), format="json").status_code == 201
    assert len(drf_creates) == 4
    assert APIClient().post(JOBS_URL, job_body(), format="json").status_code == 401
    assert len(drf_creates) == 4  # DRF refused it before its create()


@override_settings(REST_FRAMEWORK=rest_settings(job_submit="2/min"))
def test_a_submission_handed_to_drf_is_counted_once(
    alice_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request the plain view declines is counted by DRF's throttle only: 1 refused + 1 made
    use the budget of 2, so the third is the one refused with 429."""
    monkeypatch.setattr(SubmissionThrottle, "timer", staticmethod(lambda: 60.0 * 1000))
    assert alice_api.post(JOBS_URL, job_body(gpus=0), format="json").status_code == 400
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 429


def normalised(response: Any) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of ``response`` without what names the job (id, time) or
    counts them (the pending cap's message names the tenant's pending jobs)."""
    headers = {k: v for k, v in response.items() if k not in VARYING}
    if "Location" in response:
        headers["Location"] = re.sub(r"/\d+/$", "/ID/", response["Location"])
    body = response.json()
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in {"id", "submitted_at"}}
        if isinstance(body.get("error"), str):
            body["error"] = re.sub(r"(job|has) \d+", r"\1 N", body["error"])
    return response.status_code, headers, body


def outcomes(client: APIClient, run: str, clock: list[float]) -> list[tuple[int, dict[str, str], Any]]:
    """One submission of each outcome the plain view answers itself: made (201), replayed (200),
    a key reused with another body (422), throttled (429), the pending cap reached (429)."""
    key = {"HTTP_IDEMPOTENCY_KEY": f"{run}-key"}
    full = job_body(gpu_memory_mb=8000, iteration_time_s=1.5, command="run it", priority=-3, sharing="never")
    answers = [
        client.post(JOBS_URL, job_body(), format="json"),
        client.post(JOBS_URL, full, format="json", **key),
        client.post(JOBS_URL, full, format="json", **key),
        client.post(JOBS_URL, {**full, "priority": 4}, format="json", **key),
    ]
    with override_settings(REST_FRAMEWORK=rest_settings(job_submit="4/min")):
        answers.append(client.post(JOBS_URL, job_body(), format="json"))
    clock[0] += 60  # a new throttle window
    pending = Job.objects.filter(status=Job.Status.PENDING).count()
    with override_settings(SHAREWISE_MAX_PENDING_PER_TENANT=pending):
        answers.append(client.post(JOBS_URL, job_body(), format="json"))
    return [normalised(a) for a in answers]


def test_every_outcome_is_answered_as_drf_answers_it(
    alice_api: APIClient, drf_creates: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [60.0 * 2000 + 30]  # mid-window: Retry-After 30 s in both runs
    monkeypatch.setattr(SubmissionThrottle, "timer", staticmethod(lambda: clock[0]))
    fast = outcomes(alice_api, "fast", clock)
    assert drf_creates == []
    clock[0] += 60
    with override_settings(SHAREWISE_FAST_SUBMIT=False):
        slow = outcomes(alice_api, "drf", clock)
    assert len(drf_creates) == 5  # all but the throttled one, refused before create()
    assert [status for status, _, _ in fast] == [201, 201, 200, 422, 429, 429]
    assert fast[4][2] == {
        "error": "Request was throttled. Expected available in 30 seconds.",
        "retry_after": 30.0,
    }
    assert fast == slow


#: Each field's values a body may hold: the valid ones first, then ones the serializer refuses.
VALID: dict[str, list[Any]] = {
    "name": ["resnet-run", "a", "a" * 64],
    "model": ["resnet50", "vgg16", "made.up_model"],
    "batch_size": [1, 128, 2**20],
    "iterations": [1, 1000, 10**8],
    "gpus": [1, 2, 8],
    "gpu_memory_mb": [ABSENT, None, 1, 8000, 16_000, 100_000],
    "iteration_time_s": [ABSENT, None, 0.5, 1, 86_400],
    "command": [ABSENT, "", "python train.py"],
    "priority": [ABSENT, 0, 100, -100],
    "sharing": [ABSENT, "allowed", "never"],
    "gpu_types": [ABSENT, [], ["v100"]],
}
INVALID: dict[str, list[Any]] = {
    "name": [ABSENT, "a" * 65, " padded ", "Upper", "", "x\n", 3, None],
    "model": [ABSENT, "bad/name", "resnet50\n", "", 7],
    "batch_size": [ABSENT, 2**20 + 1, 0, -1, 1.5, "4", True, None],
    "iterations": [ABSENT, 10**8 + 1, 0, 2.0],
    "gpus": [ABSENT, 9, 0, 2.0, True, "2"],
    "gpu_memory_mb": [2**20 + 1, 0, "1", 1.0],
    "iteration_time_s": [86_400.5, 0, -1, "1", False],
    "command": [" padded ", "'unclosed", "x" * 4097, 5, None],
    "priority": [101, -101, None, 1.0],
    "sharing": ["sometimes", None, ""],
    "gpu_types": ["v100", None],
    "status": ["running"],
}


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A body of valid values, most often with one or two fields given a refused value (or left
    out), so that both outcomes are drawn often."""
    body = {name: draw(st.sampled_from(values)) for name, values in VALID.items()}
    for name in draw(st.lists(st.sampled_from(sorted(INVALID)), max_size=2, unique=True)):
        body[name] = draw(st.sampled_from(INVALID[name]))
    return {k: v for k, v in body.items() if v is not ABSENT}


FACTS = st.fixed_dictionaries(
    {
        "largest_gang": st.sampled_from([0, 2, 8]),
        "missing_command_refusal": st.sampled_from([None, "no agent runs a job without a command"]),
        "largest_gpu_memory_mb:": st.sampled_from([0, 4000, 16_000]),
    }
)


@pytest.mark.django_db
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies(), facts=FACTS)
def test_the_fields_taken_are_the_serializers_validated_data(
    cluster: Any, body: dict[str, Any], facts: dict[str, Any]
) -> None:
    """For any body and cluster bounds: what the plain view takes, the serializer accepts with the
    same validated fields in the same order; and what the serializer accepts without GPU types,
    the plain view takes (so it is not a path that declines everything)."""
    taken = fast_submit.validated(body, facts)
    serializer = JobSerializer(data=body, context={"cluster_facts": dict(facts)})
    accepted = serializer.is_valid()
    if taken is not None:
        assert accepted, serializer.errors
        assert list(taken.items()) == list(serializer.validated_data.items())
    elif accepted:
        assert body.get("gpu_types"), f"declined a body the serializer accepts: {body}"


def test_the_cluster_facts_have_the_names_the_plain_view_reads(cluster: Any) -> None:
    """The view reads the facts by the serializer's names; a renamed fact would be a KeyError."""
    assert set(cluster_facts.current()) == {
        "largest_gang",
        "missing_command_refusal",
        "largest_gpu_memory_mb:",
    }
