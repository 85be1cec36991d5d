"""App config of :mod:`cluster`."""

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """Tenants, quotas, nodes, GPUs, jobs, placements, job events; the tenant and admin APIs."""

    name = "cluster"
    verbose_name = "Cluster"

    def ready(self) -> None:
        """Connect the submission path's caches to the changes that invalidate them."""
        from cluster import cluster_facts, token_cache

        token_cache.connect()
        cluster_facts.connect()
