"""What ``insert_values`` writes with PostgreSQL's binary ``COPY`` is what Django's ``bulk_create``
writes (issue 16, item 3): every column of every row, for the three tables a round fills that way
(placements, job events, agent orders), and the whole database state two rounds leave behind.

On SQLite they compare the plain ``executemany`` with the ORM; on PostgreSQL
(``DATABASE_URL=postgres://…``) the ``COPY``. Each side
runs in a savepoint rolled back afterwards, so both start from the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Model

from cluster.models import GPU, Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.models import AgentOrder, Round
from scheduling.service import bulk
from scheduling.service.orders import pull_dispatch
from scheduling.service.persist import PLACEMENT_FIELDS
from scheduling.service.snapshot import forget_kept_jobs

#: A whole second a day ahead, with microseconds (a timestamp's every digit must survive).
T0 = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=123_456)


class _Rollback(Exception):
    pass


@contextmanager
def rolled_back() -> Iterator[None]:
    """A savepoint undone at the end of the block (the rows it wrote are gone)."""
    try:
        with transaction.atomic():
            yield
            raise _Rollback
    except _Rollback:
        pass


def rows_of(model: type[Model], exclude: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Every row of ``model`` as a tuple of its columns (primary key and ``exclude`` left out),
    sorted: ids of new rows differ between two runs, nothing else may."""
    names = [f.attname for f in model._meta.concrete_fields if not f.primary_key and f.name not in exclude]
    return sorted(
        (tuple(row[n] for n in names) for row in model._default_manager.values(*names)),
        key=repr,
    )


def both_ways(monkeypatch: pytest.MonkeyPatch, write: Callable[[], Any], read: Callable[[], Any]) -> tuple:
    """``read()`` after ``write()`` by ``insert_values``' own path, then after the same
    ``write()`` with ``bulk_create`` forced, each in a rolled-back savepoint."""
    seen = []
    for forced in (False, True):
        with monkeypatch.context() as patch:
            if forced:
                patch.setattr(bulk, "insert_method", lambda: "orm")
            with rolled_back():
                write()
                seen.append(read())
    return seen[0], seen[1]


@pytest.fixture
def jobs(db: None) -> list[Job]:
    """Four jobs of one tenant on a 2 × 4-GPU cluster."""
    for i in range(2):
        Node.register(f"node-0{i}", 4, 49_140, "v100")
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=8)
    return [
        Job.objects.create(
            tenant=tenant, name=f"j{i}", model="resnet50", batch_size=64, gpus=1, iterations=100
        )
        for i in range(4)
    ]


def test_placements_copy_as_the_orm_writes_them(jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = list(GPU.objects.order_by("pk").values_list("pk", flat=True))
    # every column type of a placement, NULLs included: bigint, integer, smallint, boolean,
    # timestamptz (microseconds), double precision (all 17 digits)
    values = [
        [jobs[0].pk, gpus[0], 0, 64, 0, True, T0, None, None],
        [jobs[1].pk, gpus[0], 7, 32, 1, True, T0, jobs[0].pk, 1.2345678901234567],
        [jobs[2].pk, gpus[1], 2**31 - 1, 1, 0, False, T0 + timedelta(microseconds=1), None, 0.1],
        [jobs[3].pk, gpus[1], 3, 16, 1, True, T0, jobs[2].pk, 1e-300],
    ]
    copied, orm = both_ways(
        monkeypatch,
        lambda: bulk.insert_values(Placement, PLACEMENT_FIELDS, values),
        lambda: (
            rows_of(Placement),
            sorted(Placement.objects.values_list("predicted_slowdown", flat=True), key=repr),
        ),
    )
    assert copied == orm
    assert len(copied[0]) == 4
    assert copied[1] == [0.1, 1.2345678901234567, 1e-300, None]


def test_fields_not_named_take_their_model_defaults_off_postgresql(
    jobs: list[Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off PostgreSQL a field left out takes its model default, as ``bulk_create`` gives it:
    a placement's ``slot`` 0 and ``active`` True (its ``created_at`` default is the time of the
    write, so it is named)."""
    if bulk.insert_method() == "copy":
        pytest.skip("COPY leaves unnamed columns to the database's own defaults")
    gpu = GPU.objects.order_by("pk").values_list("pk", flat=True)[0]
    named = ("job", "gpu", "generation", "sub_batch", "created_at")
    plain, orm = both_ways(
        monkeypatch,
        lambda: bulk.insert_values(Placement, named, [[jobs[0].pk, gpu, 1, 64, T0]]),
        lambda: list(Placement.objects.values_list("slot", "active", "ended_at", "predicted_slowdown")),
    )
    assert plain == orm == [(0, True, None, None)]


def test_events_and_orders_copy_as_the_orm_writes_them(
    jobs: list[Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node.objects.order_by("pk").first()
    assert node is not None
    data = {"gpus": ["node-00:0", "node-00:1"], "xi": 1.0000000000000002, "none": None, "ok": True, "ü": "ξ"}
    events = [
        (jobs[0].pk, JobEvent.Kind.PLACED, T0, "exclusive on idle GPUs node-00:0 — über ξ 1.3", data),
        (jobs[1].pk, JobEvent.Kind.PREEMPTED, T0, "", {}),
    ]
    orders = [
        (node.pk, 1, {"type": "apply_placement", "nested": [[1, 2.5], {"a": None}]}, T0),
        (node.pk, 2, {}, T0),
    ]

    def write() -> None:
        assert bulk.insert_values(JobEvent, ("job", "kind", "at", "message", "data"), events) == 2
        assert bulk.insert_values(AgentOrder, ("node", "seq", "message", "created_at"), orders) == 2

    def read() -> tuple:
        stored = JobEvent.objects.order_by("message").values_list("data", flat=True)
        return rows_of(JobEvent), rows_of(AgentOrder), [d.get("xi") for d in stored]

    copied, orm = both_ways(monkeypatch, write, read)
    assert copied == orm
    assert copied[2] == [None, 1.0000000000000002]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY's types are PostgreSQL's")
def test_copy_types_name_each_column() -> None:
    """Binary COPY needs each column's type: a foreign key's is its target's key (bigint),
    modifiers go (``varchar(16)``)."""
    assert bulk.copy_types(Placement, PLACEMENT_FIELDS) == [
        "bigint",
        "bigint",
        "integer",
        "integer",
        "smallint",
        "boolean",
        "timestamp with time zone",
        "bigint",
        "double precision",
    ]
    assert bulk.copy_types(JobEvent, ("job", "kind", "message", "data")) == [
        "bigint",
        "varchar",
        "text",
        "jsonb",
    ]


# -- a whole round each way -----------------------------------------------------------------


@pytest.fixture
def queue(db: None, settings: Any) -> None:
    """4 nodes × 4 GPUs of 49,140 MB, one tenant allowed all 16, and 30 pending jobs of 1–4 GPUs
    (some submitted with an iteration time): SJF-BSBF fills the cluster, sharing some GPUs."""
    settings.SHAREWISE_HEARTBEAT_TIMEOUT_S = 10 * 86400.0
    for i in range(4):
        Node.register(f"node-0{i}", 4, 49_140, "v100")
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=16)
    shapes = (("resnet50", 128), ("vgg16", 64), ("lm", 80), ("a3c", 32), ("ncf", 512))
    for i in range(30):
        model, batch = shapes[i % len(shapes)]
        Job.objects.create(
            tenant=tenant,
            name=f"job-{i}",
            model=model,
            batch_size=batch,
            gpus=(1, 2, 1, 4, 1, 2)[i % 6],
            iterations=(500, 2_000, 10_000)[i % 3],
            iteration_time_s=0.2 + 0.01 * i if i % 2 else None,
            submitted_at=T0 - timedelta(seconds=100 - i),
        )


def two_rounds(capture: Callable) -> None:
    """A fill round, then two running jobs finish and a second round starts others."""
    forget_kept_jobs()
    with capture(execute=True):
        first = service.run_round(now=T0, policy="sjf-bsbf")
    assert first is not None and first.n_started > 0
    done = list(Job.objects.filter(status=Job.Status.RUNNING).order_by("pk").values_list("pk", flat=True)[:2])
    Placement.objects.filter(job_id__in=done, active=True).update(
        active=False, ended_at=T0 + timedelta(seconds=30)
    )
    Job.objects.filter(pk__in=done).update(
        status=Job.Status.SUCCEEDED, finished_at=T0 + timedelta(seconds=30)
    )
    with capture(execute=True):
        service.run_round(now=T0 + timedelta(seconds=60), policy="sjf-bsbf")


def database_state() -> dict[str, Any]:
    """Every row the rounds wrote or changed, without new rows' ids and wall-clock stamps (an
    order's ``created_at``, a round's timings)."""
    return {
        "jobs": rows_of(Job),
        "placements": rows_of(Placement),
        "events": rows_of(JobEvent),
        "orders": rows_of(AgentOrder, exclude=("created_at",)),
        "rounds": rows_of(Round, exclude=("finished_at", "duration_ms", "phases_ms")),
        "shared placements": Placement.objects.filter(shared_with__isnull=False).count(),
    }


def test_rounds_leave_the_same_database_either_way(
    queue: None, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Callable
) -> None:
    service.set_dispatcher(pull_dispatch)
    try:
        copied, orm = both_ways(
            monkeypatch, lambda: two_rounds(django_capture_on_commit_callbacks), database_state
        )
    finally:
        service.set_dispatcher(None)
    assert copied == orm
    # both rounds placed jobs, some of them sharing a GPU, and sent orders
    assert len(copied["placements"]) > 16
    assert copied["shared placements"] > 0
    assert copied["orders"] and copied["events"] and len(copied["rounds"]) == 2
