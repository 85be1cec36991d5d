"""The demo's database: the cluster, the tenants with their quotas, an admin account; and SQLite
tuned for the demo's threads."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from cluster.models import Job, Node, Tenant
from common.shapes import node_names
from demo.options import DemoConfig, DemoError
from demo.workload import equal_quotas
from scheduling.models import TraceClock


@dataclass(slots=True)
class Setup:
    """What :func:`prepare_database` created: node tokens, tenant API tokens, the admin login."""

    node_tokens: dict[str, str]
    tenant_tokens: dict[str, str]
    admin_user: str
    admin_password: str
    quotas: dict[str, int]


def prepare_database(config: DemoConfig, tenants: Sequence[str]) -> Setup:
    """Register the cluster (``node-00`` … with declared GPUs), the tenants with equal quotas and
    unlimited borrowing, and an admin account with a fresh password. Raises :class:`DemoError`
    when the database already holds nodes or jobs (the demo needs a fresh one)."""
    if Node.objects.exists() or Job.objects.exists():
        raise DemoError(
            "the database already holds nodes or jobs; the demo needs a fresh one "
            "(scripts/demo.sh makes var/demo.sqlite3 anew each run; or pass --flush)"
        )
    node_tokens = {}
    for name in node_names(config.nodes):
        node, token = Node.register(name, config.gpus_per_node, config.gpu_memory_mb, "v100")
        node_tokens[node.name] = token
    quotas = equal_quotas(tenants, config.nodes * config.gpus_per_node)
    tenant_tokens = {}
    for name, quota in quotas.items():
        Tenant.objects.filter(name=name).delete()
        get_user_model().objects.filter(username=f"{name}-owner").delete()
        _, tenant_tokens[name] = Tenant.create_with_owner(name, quota_gpus=quota)
    password = secrets.token_urlsafe(9)
    users = get_user_model().objects
    admin = users.filter(username="admin").first()
    if admin is None:
        users.create_superuser("admin", "", password)
    else:
        admin.set_password(password)
        admin.is_staff = admin.is_superuser = True
        admin.save()
    return Setup(node_tokens, tenant_tokens, "admin", password, quotas)


def record_trace_clock(speedup: float, trace_origin_s: float, wall_origin_epoch_s: float, trace: str) -> None:
    """Write the replay's time scale (:class:`scheduling.models.TraceClock`, replacing any earlier
    one): trace time ``trace_origin_s`` at wall time ``wall_origin_epoch_s`` (epoch s), ``speedup``
    trace seconds per wall second — the demo's :class:`demo.live.Clock`, so the dashboard shows
    the trace time the terminal reports."""
    with transaction.atomic():
        TraceClock.objects.all().delete()
        TraceClock.objects.create(
            speedup=speedup,
            trace_origin_s=trace_origin_s,
            wall_origin=datetime.fromtimestamp(wall_origin_epoch_s, UTC),
            trace=trace[:200],
        )


def tune_sqlite() -> None:
    """On SQLite: WAL (readers never wait for the writer) and ``BEGIN IMMEDIATE`` transactions
    with a 30 s busy timeout, so the demo's threads queue for the write lock instead of failing
    with "database is locked". Takes effect for connections opened from now on."""
    db = settings.DATABASES["default"]
    if "sqlite" not in db["ENGINE"]:
        return
    options = db.setdefault("OPTIONS", {})
    options.update(transaction_mode="IMMEDIATE", timeout=30, init_command="PRAGMA journal_mode=WAL;")
    connections["default"].settings_dict.setdefault("OPTIONS", {}).update(options)
    connection.close()
