"""The Python API of the client (``sharewise.Client``) against a live service, and the client's
independence from the service (no Django, no project module)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from django.test import override_settings
from sharewise import Client, NotFound, Rejected, Throttled, UsageError

from cluster.models import Job
from tests.api.conftest import rest_settings
from tests.client.conftest import Service

CLIENT_SRC = Path(__file__).resolve().parents[2] / "client" / "src" / "sharewise"
JOB = {"name": "api-job", "model": "resnet50", "batch_size": 64, "iterations": 10, "gpus": 1}


def test_the_client_imports_nothing_of_the_service() -> None:
    allowed = {"sharewise", "requests", "urllib3", "click", "rich", "yaml"}
    for path in CLIENT_SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or top in sys.stdlib_module_names, f"{path.name}: {name}"


def test_jobs_pages_through_everything(service: Service) -> None:
    with Client(service.url, service.alice) as client:
        ids = [client.submit({**JOB, "name": f"job-{i}"})["id"] for i in range(5)]
        assert [j["id"] for j in client.jobs()] == ids[::-1]  # newest first
        assert [j["id"] for j in client.jobs(limit=2)] == ids[::-1][:2]
        assert client.jobs(status="running") == []
        assert [e["kind"] for e in client.events(ids[0], limit=1)] == ["submitted"]
        assert client.job(ids[0])["pending_reason"] == "not yet considered"


def test_errors_are_typed(service: Service) -> None:
    client = Client(service.url, service.alice, retries=0)
    with pytest.raises(NotFound):
        client.job(123456)
    with pytest.raises(Rejected) as caught:
        client.submit({**JOB, "gpus": "4"})
    assert caught.value.status == 400 and "gpus" in caught.value.fields
    with pytest.raises(UsageError):
        client.job(-1)
    with pytest.raises(UsageError):
        Client("ftp://nowhere", "t")


def test_a_throttled_submission_waits_when_told_to_soon(service: Service) -> None:
    with override_settings(REST_FRAMEWORK=rest_settings(job_submit="1/min")):
        client = Client(service.url, service.alice, retries=0, max_throttle_wait_s=0.0)
        client.submit(JOB)
        with pytest.raises(Throttled) as caught:
            client.submit({**JOB, "name": "second"})
        assert caught.value.exit_code == 6 and caught.value.retry_after_s is not None
    assert Job.objects.count() == 1


def test_the_pinned_versions_satisfy_what_the_client_declares() -> None:
    """requirements-dev.txt pins what the tests run with; client/pyproject.toml declares ranges for
    a laptop's ``pip install``: every declared dependency is pinned, inside its range."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    root = CLIENT_SRC.parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for line in (root.parent / "requirements-dev.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[canonicalize_name(name.split("[")[0])] = version.strip()
    for text in declared:
        requirement = Requirement(text)
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement.name} is not pinned in requirements-dev.txt"
        assert requirement.specifier.contains(pinned), (
            f"{requirement.name}=={pinned} is outside {requirement}"
        )


def test_submit_many_uses_the_bulk_endpoint_in_order_and_safely_twice(service: Service) -> None:
    jobs = [{**JOB, "name": f"bulk-{i}"} for i in range(5)]
    keys = [f"key-{i}" for i in range(5)]
    with Client(service.url, service.alice) as client:
        made = client.submit_many(jobs, keys)
        assert [j["name"] for j in made] == [f"bulk-{i}" for i in range(5)]
        again = client.submit_many(jobs, keys)  # the same keys: the same jobs, none made twice
        assert [j["id"] for j in again] == [j["id"] for j in made]
        with pytest.raises(Rejected) as caught:
            client.submit_many([JOB, {**JOB, "gpus": 0}])
        assert caught.value.status == 400 and set(caught.value.fields or {}) == {"1"}
        with pytest.raises(UsageError):
            client.submit_many(jobs, keys[:2])
    assert Job.objects.filter(name__startswith="bulk-").count() == 5


def test_a_400_names_every_field_the_api_lists_on_one_line() -> None:
    """The API's ``error`` names the first field only; the client's message names each, nested
    ones by their path, fields with one message together, in the API's order."""
    from sharewise.errors import Rejected, error_for

    body = {
        "error": "invalid input: model: This field is required.",
        "fields": {
            "model": ["This field is required."],
            "heartbeat": {"gpus": ["GPU index 1 is listed 2 times; list each GPU of the node once"]},
            "events": [{}, {"job_id": ["A valid integer is required."]}],
            "gpus": ["This field is required."],
        },
    }
    exc = error_for(400, body)
    assert isinstance(exc, Rejected) and exc.fields == body["fields"]
    assert str(exc) == (
        "invalid input: model, gpus: This field is required.; "
        "heartbeat: gpus: GPU index 1 is listed 2 times; list each GPU of the node once; "
        "events: job_id: A valid integer is required."
    )
    one = {"error": "invalid input: gpus: too many", "fields": {"gpus": ["too many"]}}
    assert str(error_for(400, one)) == "invalid input: gpus: too many"  # as the API says it
    bulk = {"error": "1 of 2 job(s) are invalid; none was submitted", "items": {"1": {"model": ["x"]}}}
    assert str(error_for(400, bulk)) == bulk["error"]
