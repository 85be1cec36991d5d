"""Every error of a dashboard JSON endpoint is JSON (docs/DASHBOARD.md): a method other than GET
used to be an empty ``text/html`` 405, a POST without a CSRF token Django's HTML 403 page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from frontend.views import ENDPOINTS


def csrf_client(user: Any) -> tuple[Client, str]:
    """A logged-in client that enforces CSRF checks, and a valid token for it."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/dashboard/")  # sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_another_method_with_a_valid_token_is_a_json_405_with_allow(
    alice: Any, cluster: Any, method: str, name: str
) -> None:
    client, token = csrf_client(alice)
    answer = getattr(client, method)(f"/dashboard/api/{name}.json", HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 405
    assert answer["Content-Type"] == "application/json"
    assert answer["Allow"] == "GET"
    assert answer.json() == {"error": f"method {method.upper()} not allowed: use GET"}


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_post_without_a_csrf_token_is_a_json_403(alice: Any, cluster: Any, name: str) -> None:
    client, _ = csrf_client(alice)
    answer = client.post(f"/dashboard/api/{name}.json")
    assert answer.status_code == 403
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"error": "CSRF check failed: CSRF token missing."}


def test_a_page_keeps_djangos_csrf_page(alice: Any, cluster: Any) -> None:
    client, _ = csrf_client(alice)
    answer = client.post("/dashboard/logout/")
    assert answer.status_code == 403
    assert answer["Content-Type"].startswith("text/html")


def test_a_get_still_answers(alice: Any, cluster: Any) -> None:
    client, _ = csrf_client(alice)
    assert client.get("/dashboard/api/queue.json").status_code == 200
