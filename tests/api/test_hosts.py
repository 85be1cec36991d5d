"""A Host header ``ALLOWED_HOSTS`` does not admit: the API's JSON error naming the host and the
setting (docs/API.md "Errors"), never Django's blank HTML page."""

from __future__ import annotations

import pytest
from django.test import Client

PATHS = ["/api/v1/tenant/", "/api/v1/jobs/", "/api/schema/", "/dashboard/api/queue/"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_a_disallowed_host_is_a_json_400_naming_it(path: str) -> None:
    response = Client().get(path, HTTP_HOST="2130706433:8000")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "host '2130706433:8000' is not in this server's"
        " ALLOWED_HOSTS setting: use a host name it lists, or add '2130706433' to ALLOWED_HOSTS"
        " on the server",
        "code": "disallowed_host",
    }


@pytest.mark.django_db
def test_a_malformed_host_is_not_echoed() -> None:
    response = Client().get("/api/v1/tenant/", HTTP_HOST="<script>x</script>")
    assert response.status_code == 400
    assert response.json() == {
        "error": "the request's Host header is not a valid host name; send the server's host name,"
        " one its ALLOWED_HOSTS setting lists",
        "code": "disallowed_host",
    }


@pytest.mark.django_db
def test_a_disallowed_host_outside_the_api_keeps_djangos_page() -> None:
    response = Client().get("/dashboard/", HTTP_HOST="2130706433:8000")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_without_a_host_header_the_server_name_is_quoted_as_django_reads_it() -> None:
    response = Client().get("/api/v1/tenant/", SERVER_NAME="sharewise.invalid")
    assert response.status_code == 400
    assert response.json()["error"].startswith("host 'sharewise.invalid' is not in")
