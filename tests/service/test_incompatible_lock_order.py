"""Two out-of-memory events marking the same two pairs incompatible
(scheduling/service/observations.py ``mark_incompatible``, in each event's transaction) insert
them in one order, the pairs' own (docs/LOCKS.md). An insert of a key another open transaction
has just inserted waits for that transaction (the unique index), so two events inserting two
keys in opposite orders deadlocked: a gang of ResNet-50 beside a VGG-16 job and an LSTM one,
and a second such gang whose partners' ids come in the other order (the pairs went in the order
of the partners' ids). PostgreSQL only (SQLite takes the whole database's lock).

The interleaving is made deterministic by a barrier after each event's first insert: both have
inserted one key when either goes on to its second.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from cluster.models import Job
from scheduling.models import IncompatiblePair
from scheduling.service.observations import mark_incompatible
from tests.service.lock_threads import in_thread, node_and_jobs

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


def test_two_events_marking_the_same_two_pairs_do_not_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    _, (first, second) = node_and_jobs(2)
    manager = IncompatiblePair.objects
    insert = manager.get_or_create
    barrier = threading.Barrier(2, timeout=2.0)
    seen = threading.local()

    def paced(**fields: Any) -> tuple[IncompatiblePair, bool]:
        found = insert(**fields)
        if not getattr(seen, "once", False):
            seen.once = True
            try:  # both events have inserted one pair (or the other waits for this one's)
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return found

    monkeypatch.setattr(manager, "get_or_create", paced)
    new: dict[int, int] = {}

    def event(job: Job, partners: list[tuple[int, str, int, int]]) -> None:
        with transaction.atomic():
            new[job.pk] = mark_incompatible(job, partners, "CUDA out of memory", timezone.now())

    # (partner id, partner model, partner sub-batch, the job's sub-batch): VGG-16 then LSTM for
    # the first, LSTM then VGG-16 for the second
    errors: list[BaseException] = []
    threads = [
        in_thread(lambda: event(first, [(10, "vgg16", 64, 64), (11, "lstm", 64, 64)]), errors),
        in_thread(lambda: event(second, [(12, "lstm", 64, 64), (13, "vgg16", 64, 64)]), errors),
    ]
    for thread in threads:
        thread.join(20)
    assert not errors, [repr(e) for e in errors]
    # both pairs once, in pair_id order (the name's order: "lstm" < "resnet50" < "vgg16"), each
    # kept as its first event recorded it; the other event found both
    pairs = IncompatiblePair.objects.order_by("model_a", "model_b")
    rows = list(pairs.values_list("model_a", "sub_a", "model_b", "sub_b", "job", "partner"))
    assert sorted(new.values()) == [0, 2]
    winner = first.pk if new[first.pk] == 2 else second.pk
    partners = {first.pk: (11, 10), second.pk: (12, 13)}[winner]  # its LSTM partner, its VGG-16
    assert rows == [
        ("lstm", 64, "resnet50", 64, partners[0], winner),
        ("resnet50", 64, "vgg16", 64, winner, partners[1]),
    ]
