"""Dashboard URLs (mounted under ``/dashboard/``): login, logout, the page, its JSON endpoints
(any other path under ``api/``: ``404 {"error": "not found"}``, as under ``/api/v1/``)."""

from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from cluster.exceptions import api_not_found
from frontend import views

app_name = "frontend"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="frontend/login.html",
            redirect_authenticated_user=True,
            next_page="frontend:dashboard",
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page="frontend:login"), name="logout"),
    *(path(f"api/{name}.json", views.endpoint, {"name": name}, name=name) for name in views.ENDPOINTS),
    # last: any other path under api/ is the REST API's JSON 404, not Django's HTML page (also
    # with DEBUG on, where handler404 is not used); [\s\S] so that a newline matches too
    re_path(r"^api/[\s\S]*$", api_not_found, name="api-not-found"),
]
