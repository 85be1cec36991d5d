"""The API docs page works on an offline cluster: no script or stylesheet from another host."""

import re

import pytest


@pytest.mark.django_db
def test_api_docs_load_nothing_from_another_host(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("reader"))  # the docs need a login
    response = client.get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any("swagger-ui-bundle.js" in a for a in assets)
    # every asset is a path on this server, never an absolute URL to a CDN
    assert [a for a in assets if re.match(r"^(https?:)?//", a)] == []
