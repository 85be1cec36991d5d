"""Input that used to earn a 500, or a silent misreading (TESTING.md "Bad input at the API"): each
is now a 4xx with a JSON ``error``, and the schema states the bounds the server holds to."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from cluster.models import MAX_REPORTED_GENERATION, Job, JobEvent, Node, Placement, Quota, Tenant
from tests.api.conftest import JOBS_URL, job_body

SURROGATE_KEY_BODY = '{"\\udc00": 1, "name": "x"}'


def post_raw(client: APIClient, url: str, raw: str, content_type: str = "application/json") -> Any:
    return client.generic("POST", url, raw, content_type=content_type)


@pytest.mark.parametrize("url", [JOBS_URL, "/api/v1/admin/tenants/"])
def test_a_lone_surrogate_as_a_key_is_400(staff_api: APIClient, alice_api: APIClient, url: str) -> None:
    client = staff_api if "admin" in url else alice_api
    response = post_raw(client, url, SURROGATE_KEY_BODY)
    assert response.status_code == 400
    assert response.json() == {
        "error": "malformed JSON: an object key holds a lone surrogate (\\ud800-\\udfff)"
    }


def test_a_lone_surrogate_echoed_by_an_error_is_escaped_not_500(staff_api: APIClient) -> None:
    node = Node.objects.get(name="node-00")
    response = staff_api.generic(
        "PATCH", f"/api/v1/admin/nodes/{node.pk}/", '{"status": "\\udc00"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["fields"] == {"status": ['"\udc00" is not a valid choice.']}
    assert response.content.isascii()  # written with \uXXXX escapes


def test_a_wildcard_content_type_is_415(alice_api: APIClient) -> None:
    import json

    for content_type in ("*/*", "application/*"):
        response = post_raw(alice_api, JOBS_URL, json.dumps(job_body()), content_type)
        assert response.status_code == 415, content_type
        assert response.json()["error"].startswith("Unsupported media type")
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True, reset_sequences=True)  # the tenant is id 1
@pytest.mark.parametrize("tenant", [1.5, True, "1", 0, 2**63])
def test_a_quota_tenant_must_be_an_existing_integer_id(staff_api: APIClient, tenant: Any) -> None:
    existing = Tenant.objects.create(name="team-z")
    assert existing.pk == 1
    response = staff_api.post(
        "/api/v1/admin/quotas/", {"tenant": tenant, "guaranteed_gpus": 2}, format="json"
    )
    assert response.status_code == 400, response.content
    assert set(response.json()["fields"]) == {"tenant"}
    assert not Quota.objects.filter(tenant=existing).exists()


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("offset=null", "offset"),
        ("offset=-1", "offset"),
        ("offset=10000000000000", "offset"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=abc", "limit"),
        ("limit=1.5", "limit"),
    ],
)
def test_bad_pagination_is_400_not_ignored(
    alice_api: APIClient, alice_job: Any, query: str, name: str
) -> None:
    response = alice_api.get(f"{JOBS_URL}?{query}")
    assert response.status_code == 400, response.content
    assert set(response.json()["fields"]) == {name}


@pytest.mark.parametrize(
    ("url", "query", "name"),
    [
        (JOBS_URL, "limit=10&limit=20", "limit"),
        (JOBS_URL, "offset=0&offset=0", "offset"),
        (JOBS_URL, "status=pending&status=running", "status"),
        ("/api/v1/tenant/", "windows=2h&windows=24h", "windows"),
        ("/api/v1/admin/usage/", "windows=7200&windows=86400", "windows"),
        ("{job}logs/", "offset=1&offset=2", "offset"),
        ("{job}logs/", "wait=0&wait=1", "wait"),
    ],
)
def test_a_query_parameter_given_twice_is_400_naming_it(
    alice_api: APIClient, staff_api: APIClient, alice_job: Any, url: str, query: str, name: str
) -> None:
    """Each reader used to take the last value silently (``?limit=10&limit=20`` listed 20)."""
    client = staff_api if "admin" in url else alice_api
    job_url = f"{JOBS_URL}{alice_job['id']}/"
    response = client.get(f"{url.format(job=job_url)}?{query}")
    assert response.status_code == 400, response.content
    first, second = (pair.split("=")[1] for pair in query.split("&"))
    shown = ", ".join(v if v.isdigit() else repr(v) for v in (first, second))
    detail = f"given 2 times ({shown}); give it once"
    assert response.json() == {"error": f"invalid input: {name}: {detail}", "fields": {name: [detail]}}


def test_a_repeated_parameter_on_a_job_read_is_not_a_list_filter(
    alice_api: APIClient, alice_job: Any
) -> None:
    """``status`` filters only the list: a job read by id ignores it, once or twice."""
    assert alice_api.get(f"{JOBS_URL}{alice_job['id']}/?status=a&status=b").status_code == 200


def test_pagination_in_bounds(alice_api: APIClient, alice_job: Any) -> None:
    body = alice_api.get(f"{JOBS_URL}?limit=500&offset=0").json()
    assert body["count"] == 1 and [j["id"] for j in body["results"]] == [alice_job["id"]]
    assert alice_api.get(f"{JOBS_URL}?offset=1000000000000").json()["results"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/%0A/",
        "/api/v1/jobs/1%0A/",
        "/api/v1/%0A/",
        "/api/v1/agent/jobs/9999999999999999999/events/",
    ],
)
def test_odd_paths_under_the_api_are_a_json_404(alice_api: APIClient, path: str) -> None:
    response = alice_api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json" and response.json() == {"error": "not found"}


def test_a_path_django_finds_nowhere_under_api_is_a_json_404(client: Any, db: None) -> None:
    response = client.get("/api/nothing-here")
    assert response.status_code == 404 and response.json() == {"error": "not found"}
    assert client.get("/nothing-here").status_code == 404  # elsewhere: Django's page


def test_iteration_time_zero_is_refused_and_the_schema_says_so(alice_api: APIClient, client: Any) -> None:
    response = alice_api.post(JOBS_URL, job_body(iteration_time_s=0), format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"iteration_time_s": ["must be greater than 0"]}
    schema = alice_api.get("/api/schema/?format=json").json()["components"]["schemas"]
    for component, field in (("JobRequest", "iteration_time_s"), ("AgentEventRequest", "iter_time_s")):
        prop = schema[component]["properties"][field]
        assert (prop["minimum"], prop["exclusiveMinimum"], prop["maximum"]) == (0, True, 86_400.0), component


def test_the_schema_bounds_every_integer_to_what_the_database_holds(alice_api: APIClient) -> None:
    schema = alice_api.get("/api/schema/?format=json").json()
    components = schema["components"]["schemas"]
    requests = {name: c for name, c in components.items() if name.endswith("Request")}
    assert {"JobRequest", "HeartbeatRequest", "AgentRunningRequest", "AdminQuotaRequest"} <= set(requests)
    for name, component in requests.items():
        for field, prop in component.get("properties", {}).items():
            if prop.get("type") == "integer" and not prop.get("readOnly"):
                assert "maximum" in prop and "minimum" in prop, f"{name}.{field} is unbounded"
                assert prop["maximum"] <= 2**63 - 1, f"{name}.{field}"
    assert components["AgentRunningRequest"]["properties"]["generation"]["maximum"] == MAX_REPORTED_GENERATION
    key = next(
        p for p in schema["paths"]["/api/v1/jobs/"]["post"]["parameters"] if p["name"] == "Idempotency-Key"
    )
    assert key["schema"] == {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[!-~]+$"}
    listing = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert (listing["limit"]["minimum"], listing["limit"]["maximum"]) == (1, 500)
    assert (listing["offset"]["minimum"], listing["offset"]["maximum"]) == (0, 10**12)


def test_admin_endpoints_document_their_errors(alice_api: APIClient) -> None:
    paths = alice_api.get("/api/schema/?format=json").json()["paths"]
    for path, item in paths.items():
        for method, operation in item.items():
            if method not in ("get", "post", "patch", "delete"):
                continue
            codes = set(operation["responses"])
            assert {"401", "403", "503"} <= codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
            if method in ("post", "patch") and "requestBody" in operation:
                assert {"400", "413", "415"} <= codes, (method, path)
    assert "409" in paths["/api/v1/admin/nodes/{id}/"]["delete"]["responses"]


def test_a_node_that_ran_jobs_can_be_deleted_once_idle(staff_api: APIClient, tenant_a: Tenant) -> None:
    node = Node.objects.get(name="node-00")
    job = Job.objects.create(
        tenant=tenant_a, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1
    )
    Placement.objects.create(job=job, gpu=node.gpus.get(index=0), generation=3, sub_batch=64, active=False)
    JobEvent.objects.create(job=job, kind=JobEvent.Kind.SUCCEEDED)
    response = staff_api.delete(f"/api/v1/admin/nodes/{node.pk}/")
    assert response.status_code == 204, response.content
    assert not Node.objects.filter(pk=node.pk).exists() and not Placement.objects.exists()
    assert Job.objects.filter(pk=job.pk).exists() and JobEvent.objects.filter(job=job).exists()


# A key given twice: JSON leaves its meaning open and Python kept the last value, so
# {"gpus": 1, "gpus": 2} made a 2-GPU job. Now a 400 naming the key, and nothing written.
DUPLICATE_GPUS = (
    '{"name": "x", "model": "resnet50", "batch_size": 128, "iterations": 1000, "gpus": 1, "gpus": 2}'
)


DUPLICATE = 'malformed JSON: key "{}" given twice in one object; give it once'


@pytest.mark.parametrize("accept", ["*/*", "application/json; indent=2"])  # the plain view and DRF's
def test_a_key_given_twice_in_a_submission_is_400_naming_it(alice_api: APIClient, accept: str) -> None:
    response = alice_api.generic(
        "POST", JOBS_URL, DUPLICATE_GPUS, content_type="application/json", HTTP_ACCEPT=accept
    )
    assert response.status_code == 400
    assert response.json() == {"error": 'malformed JSON: key "gpus" given twice in one object; give it once'}
    assert not Job.objects.exists()


def test_a_key_given_twice_anywhere_is_400_on_every_endpoint(staff_api: APIClient, cluster: Any) -> None:
    node = Node.objects.get(name="node-00")
    token = node.issue_agent_token()
    node.save()
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Node {token}")
    sent = [
        (staff_api, "/api/v1/admin/tenants/", '{"name": "t", "name": "u"}', "name"),
        (agent, "/api/v1/agent/heartbeat/", '{"node": "node-00", "gpus": [], "gpus": []}', "gpus"),
        (agent, "/api/v1/agent/batch/", '{"node": "node-00", "events": [{"id": 1, "id": 2}]}', "id"),
    ]
    for client, url, raw, key in sent:
        response = post_raw(client, url, raw)
        assert response.status_code == 400, url
        assert response.json()["error"] == DUPLICATE.format(key)
    assert not Tenant.objects.filter(name__in=["t", "u"]).exists()


def test_a_duplicate_key_is_quoted_with_escapes(alice_api: APIClient) -> None:
    response = post_raw(alice_api, JOBS_URL, '{"a\\nb": 1, "a\\nb": 2}')
    assert response.status_code == 400
    assert response.json()["error"] == 'malformed JSON: key "a\\nb" given twice in one object; give it once'


def test_a_404_outside_drf_is_written_as_drfs(alice_api: APIClient, cluster: Any) -> None:
    # a path naming nothing (answered outside DRF) and a job id nobody has (DRF's own 404): the
    # same bytes, compact as DRF writes JSON (the first had a space after ':' and ',')
    outside = alice_api.get("/api/v1/jobs/99999999999999999999999/")
    inside = alice_api.get("/api/v1/jobs/999999/")
    assert outside.status_code == inside.status_code == 404
    assert outside.content == inside.content == b'{"error":"not found"}'
    assert alice_api.get("/healthz").content == b'{"status":"ok"}'
