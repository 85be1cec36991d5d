"""App config of :mod:`cluster`."""

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """Tenants, quotas, nodes, GPUs, jobs, placements, job events; the tenant and admin APIs."""

    name = "cluster"
    verbose_name = "Cluster"
