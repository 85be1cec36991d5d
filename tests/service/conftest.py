"""Service tests reuse the API fixtures (cluster, Alice, Bob, Charlie and their tenants)."""

from tests.api.conftest import (  # noqa: F401 - pytest finds fixtures by name in this module
    _fresh_cache,
    alice,
    bob,
    charlie,
    cluster,
    tenant_a,
    tenant_c,
)
