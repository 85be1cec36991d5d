"""The learned classes of a submission's answer kept per process (``knowledge.recent_class_records``,
``SHAREWISE_CLASS_CACHE_S``): a kept class saves the answer's query, a class this process learns
is in the very next answer, and one written elsewhere (no signal, as by another process) is read
again once the lifetime has passed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from scheduling.core.learning import SampleStats
from scheduling.models import LearnedIterTime
from scheduling.service import knowledge
from scheduling.service.observations import fold_shared
from tests.api.conftest import JOBS_URL, job_body

#: The class of :func:`job_body`'s job: ResNet-50, global batch 128, 2 GPUs.
CLASS = dict(zip(("model", "batch_size", "gpus"), knowledge.class_key("resnet50", 128, 2), strict=True))


def submit(client: APIClient, **overrides: Any) -> dict[str, Any]:
    response = client.post(JOBS_URL, job_body(**overrides), format="json")
    assert response.status_code == 201, response.content
    return response.json()  # type: ignore[no-any-return]


def class_reads(queries: CaptureQueriesContext) -> int:
    """How many of the captured statements read the learned classes."""
    return sum("scheduling_learneditertime" in q["sql"] for q in queries.captured_queries)


def stats_of(*times_s: float) -> SampleStats:
    stats = SampleStats()
    for t in times_s:
        stats = stats.add(t)
    return stats


def write_class(*times_s: float, signal: bool = True) -> None:
    """The class of :data:`CLASS` with these exclusive samples (s): through the ORM's ``save``
    (its signal, as the admin), or by ``update()`` (no signal: what another process's write
    looks like to this one)."""
    stats = stats_of(*times_s)
    values = {
        "count": stats.count,
        "weight": stats.weight,
        "mean_log": stats.mean_log,
        "var_log": stats.var_log,
    }
    if signal:
        row = LearnedIterTime.objects.filter(**CLASS).first() or LearnedIterTime(**CLASS)
        for name, value in values.items():
            setattr(row, name, value)
        row.save()
    else:
        assert LearnedIterTime.objects.filter(**CLASS).update(**values) == 1


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The monotonic clock the kept classes are aged by, set by the test (s)."""
    now = [1000.0]
    monkeypatch.setattr(knowledge, "monotonic", lambda: now[0])
    return now


@pytest.mark.usefixtures("pending_counts_held")
def test_a_kept_class_saves_the_answers_query(alice_api: APIClient, clock: list[float]) -> None:
    first = submit(alice_api)
    with CaptureQueriesContext(connection) as queries:
        second = submit(alice_api, name="second")
    assert class_reads(queries) == 0
    assert (second["scheduler_iteration_time_s"], second["iteration_time_source"]) == (
        first["scheduler_iteration_time_s"],
        "profile",
    )
    with override_settings(SHAREWISE_CLASS_CACHE_S=0), CaptureQueriesContext(connection) as queries:
        submit(alice_api, name="uncached")
    assert class_reads(queries) == 1


def test_a_class_learned_in_this_process_is_in_the_next_answer(
    alice_api: APIClient, clock: list[float]
) -> None:
    """The class's row saved (its signal), then a sample folded into the existing row as an agent's
    report does (a plain ``UPDATE``, no signal): each is in the next answer, the clock unmoved."""
    assert submit(alice_api)["iteration_time_source"] == "profile"  # kept: no class
    write_class(0.4, 0.4, 0.4)
    learned = submit(alice_api, name="learned")
    assert learned["iteration_time_source"] == "learned"
    assert learned["scheduler_iteration_time_s"] == pytest.approx(0.4)
    fold_shared([(LearnedIterTime, CLASS, 0.8)])
    more = submit(alice_api, name="more")
    assert more["scheduler_iteration_time_s"] == pytest.approx(stats_of(0.4, 0.4, 0.4, 0.8).mean)


def test_a_class_written_elsewhere_is_read_again_after_the_lifetime(
    alice_api: APIClient, clock: list[float]
) -> None:
    write_class(0.4, 0.4, 0.4)
    assert submit(alice_api)["scheduler_iteration_time_s"] == pytest.approx(0.4)
    write_class(0.9, 0.9, 0.9, signal=False)
    clock[0] += 0.99
    with CaptureQueriesContext(connection) as queries:
        kept = submit(alice_api, name="kept")
    assert class_reads(queries) == 0 and kept["scheduler_iteration_time_s"] == pytest.approx(0.4)
    clock[0] += 0.01  # 1 s since it was read: SHAREWISE_CLASS_CACHE_S
    with CaptureQueriesContext(connection) as queries:
        again = submit(alice_api, name="again")
    assert class_reads(queries) == 1 and again["scheduler_iteration_time_s"] == pytest.approx(0.9)


KEY = knowledge.class_key("resnet50", 128, 2)


@pytest.mark.django_db
def test_a_read_overtaken_by_a_forget_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, clock: list[float]
) -> None:
    """A class learned (here, by another thread) while a read was under way: what that read found
    may predate the write, so it answers its caller but is not kept."""
    read = knowledge.class_records

    def overtaken(keys: Any) -> Any:
        found = read(keys)
        knowledge.forget_class_records()
        return found

    monkeypatch.setattr(knowledge, "class_records", overtaken)
    knowledge.recent_class_records([KEY])
    monkeypatch.setattr(knowledge, "class_records", read)
    with CaptureQueriesContext(connection) as queries:
        knowledge.recent_class_records([KEY])
        knowledge.recent_class_records([KEY])
    assert class_reads(queries) == 1  # read again once, then kept


@pytest.mark.django_db
def test_the_models_kept_are_bounded(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> None:
    """Model names are the submitters' to choose: past :data:`KEPT_CLASS_MODELS` the memory starts
    again from the models of the read."""
    monkeypatch.setattr(knowledge, "KEPT_CLASS_MODELS", 2)
    keys = [knowledge.class_key(model, 128, 2) for model in ("a", "b", "c")]
    with CaptureQueriesContext(connection) as queries:
        for key in [*keys, keys[2], keys[0]]:  # a, b kept; c starts again; c kept; a read again
            knowledge.recent_class_records([key])
    assert class_reads(queries) == 4


@pytest.mark.django_db
def test_a_read_between_a_write_and_its_commit_is_forgotten_at_the_commit(
    django_capture_on_commit_callbacks: Any, clock: list[float]
) -> None:
    """A read after the writer's forget but before its commit still sees the old rows (another
    thread's view) and keeps them: the writer's commit drops them again."""
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        knowledge.forget_class_records()  # the writer, in its transaction
        knowledge.recent_class_records([KEY])  # kept: what the database showed before the commit
    assert len(callbacks) == 1
    with CaptureQueriesContext(connection) as queries:
        knowledge.recent_class_records([KEY])
    assert class_reads(queries) == 1


@pytest.mark.django_db
def test_a_class_learned_for_another_model_keeps_this_models_kept_classes(clock: list[float]) -> None:
    """A report teaches one class (a sample folded into its row, an ``UPDATE`` without signal): the
    kept classes of the other models stay (no read again), the taught model's are read again.
    (A class's first row is made through the ORM, whose signal forgets every model.)"""
    vgg = knowledge.class_key("vgg16", 128, 2)
    vgg_class = dict(zip(("model", "batch_size", "gpus"), vgg, strict=True))
    fold_shared([(LearnedIterTime, vgg_class, 0.5)])  # the row made, every model forgotten
    knowledge.recent_class_records([KEY])
    knowledge.recent_class_records([vgg])
    fold_shared([(LearnedIterTime, vgg_class, 0.5)])
    with CaptureQueriesContext(connection) as queries:
        knowledge.recent_class_records([KEY])
    assert class_reads(queries) == 0
    with CaptureQueriesContext(connection) as queries:
        found = knowledge.recent_class_records([vgg])
    assert class_reads(queries) == 1 and found[vgg].stats is not None and found[vgg].stats.count == 2
