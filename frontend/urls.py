"""Dashboard URLs (mounted under ``/dashboard/``): login, logout, the page, its JSON endpoints."""

from django.contrib.auth import views as auth_views
from django.urls import path

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
]
