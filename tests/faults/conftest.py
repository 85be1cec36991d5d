"""The fault campaign uses the integration tests' fixtures: PostgreSQL (committed transactions,
seen by the deployment's processes) and its own emptied Redis database."""

from tests.integration.conftest import postgres, redis_client  # noqa: F401 - fixtures by name
