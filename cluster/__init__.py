"""The cluster app: tenants, quotas, nodes, GPUs, jobs, placements and their REST API."""
