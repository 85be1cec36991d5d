"""The quick check of a batch report (``cluster/quick_validation.py``) gives exactly what DRF's
serializer gives for every body it vouches for, and vouches for no body DRF refuses: random
bodies built from valid items and from the values that trip validators (wrong JSON types, bounds,
blanks, padding, NUL, surrogates, huge integers, missing and unknown keys)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.fields import Field

from cluster.agent_serializers import BatchReportSerializer
from cluster.quick_validation import field_check, quick_validator

#: Values that trip some validator of some field (each field draws from them too).
ODD = [
    None,
    True,
    False,
    0,
    -1,
    1,
    1.5,
    -0.0,
    2**63,
    10**400,
    float("inf"),
    float("nan"),
    "",
    "  ",
    " x ",
    "1",
    "x\x00y",
    "\ud800",
    "é",
    "started",
    "oom",
    [],
    {},
    [1],
]
ABSENT = object()


def maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An optional field: ``valid``, or its key left out."""
    return st.one_of(valid, valid, st.just(ABSENT))


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object of ``fields`` (an ``ABSENT`` value leaves its key out), sometimes with an
    unknown key (ignored by DRF)."""

    def build(values: dict[str, Any], extra: bool) -> dict[str, Any]:
        body = {key: value for key, value in values.items() if value is not ABSENT}
        if extra:
            body["newer_agent_field"] = 1
        return body

    return st.builds(build, st.fixed_dictionaries(fields), st.booleans())


# valid values, the bounds' own values among them
ids = st.integers(min_value=0, max_value=2**63 - 1)
numbers = st.one_of(st.floats(min_value=0, max_value=1e12), st.integers(0, 10**12))
positive = st.one_of(st.floats(min_value=1e-300, max_value=1e6), st.integers(1, 10**6))
text = st.text(alphabet=st.sampled_from("ab \t\né"), min_size=1, max_size=8).filter(lambda t: t.strip() != "")
chunk = obj(
    job_id=ids,
    run=st.one_of(text, st.just(" node-01/g3\n")),
    offset=st.integers(0, 2**62),
    data=st.one_of(text, st.just(""), st.just("  ")),
    eof=maybe(st.booleans()),
)
event = obj(
    job_id=ids,
    generation=st.integers(0, 2**31),
    event=st.sampled_from(["started", "progress", "finished", "failed", "stopped"]),
    iterations_done=numbers,
    iter_time_s=maybe(st.one_of(st.none(), positive)),
    reason=maybe(st.one_of(text, st.just(""))),
    memory_mb=maybe(st.one_of(st.none(), positive)),
    failure_kind=maybe(st.sampled_from(["", "oom"])),
)
gpu = obj(
    index=st.integers(0, 1023),
    uuid=maybe(st.one_of(text, st.just(""))),
    memory_mb=maybe(st.integers(0, 10**6)),
    healthy=st.booleans(),
)
running = obj(job_id=ids, generation=st.integers(0, 5), iterations_done=maybe(numbers))
heartbeat = obj(
    gpus=st.lists(gpu, max_size=3, unique_by=lambda g: g["index"]),
    running=st.lists(running, max_size=3, unique_by=lambda r: r["job_id"]),
    executor=maybe(st.sampled_from(["process", "emulated"])),
    report_latency_s=maybe(numbers),
)
valid_reports = obj(
    node=st.one_of(text, st.just("node-01")),
    logs=maybe(st.lists(chunk, max_size=3)),
    events=maybe(st.lists(event, max_size=3)),
    heartbeat=maybe(st.one_of(st.none(), heartbeat)),
    after=maybe(st.one_of(st.none(), ids)),
)


def places(body: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a key or list item of ``body``."""
    found = []
    if isinstance(body, dict):
        for key, value in body.items():
            found.append((*path, key))
            found.extend(places(value, (*path, key)))
    elif isinstance(body, list):
        for index, value in enumerate(body):
            found.append((*path, index))
            found.extend(places(value, (*path, index)))
    return found


@st.composite
def report(draw: st.DrawFn) -> dict[str, Any]:
    """A valid report (half the time) or one with one to three values made odd or left out."""
    body = draw(valid_reports)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        spots = places(body)
        if not spots:
            break
        *parent_path, last = draw(st.sampled_from(spots))
        parent = body
        for step in parent_path:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[last]
        else:
            parent[last] = copy.deepcopy(draw(st.sampled_from(ODD)))  # ODD's own lists stay as they are
    return body


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (``1 == 1.0`` is not enough: a float field must
    give a float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def drf(body: Any) -> dict[str, Any] | None:
    """DRF's validated data of ``body``, or ``None`` when it refuses it (or fails on it)."""
    serializer = BatchReportSerializer(data=body)
    try:
        valid = serializer.is_valid()
    except (OverflowError, ValueError):  # DRF's own failure on a value: not ours to vouch for
        return None
    return dict(serializer.validated_data) if valid else None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(report())
def test_the_quick_check_agrees_with_drf(body: dict[str, Any]) -> None:
    quick = quick_validator(BatchReportSerializer)(body)
    expected = drf(body)
    if expected is None:
        assert quick is None
    elif quick is not None:
        assert same(quick, expected), (quick, expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b"]), min_size=0, max_size=3))
def test_every_valid_body_of_the_agents_shape_is_vouched_for(kinds: list[str]) -> None:
    """The bodies the agent sends are taken here, not referred (else the check saves nothing)."""
    body = valid_report(n=len(kinds))
    quick = quick_validator(BatchReportSerializer)(body)
    assert quick is not None
    assert same(quick, drf(body))


def valid_report(n: int = 2) -> dict[str, Any]:
    """A report as the agent sends it: ``n`` chunks and events, a heartbeat of two GPUs and jobs."""
    return {
        "node": "node-01",
        "logs": [
            {"job_id": i + 1, "run": " node-01/g1 ", "offset": 0, "data": " é\n", "eof": i % 2 == 0}
            for i in range(n)
        ],
        "events": [
            {"job_id": i + 1, "generation": 1, "event": "finished", "iterations_done": 10}
            | {"iter_time_s": 0.02}
            for i in range(n)
        ],
        "heartbeat": {
            "gpus": [{"index": g, "uuid": f"GPU-{g}", "memory_mb": 81920, "healthy": True} for g in range(2)],
            "running": [{"job_id": j, "generation": 1, "iterations_done": 3} for j in range(2)],
            "executor": "emulated",
            "report_latency_s": 0,
        },
        "after": 5,
    }


def test_values_by_hand() -> None:
    """What DRF does to a few values, worked out by hand: a run key is trimmed, a chunk's data is
    not, an integer number becomes a float, absent fields take their defaults (a new list each)."""
    check = quick_validator(BatchReportSerializer)
    body = valid_report(n=1)
    got = check(body)
    assert got is not None
    assert got["logs"][0]["run"] == "node-01/g1"
    assert got["logs"][0]["data"] == " é\n"
    assert got["events"][0]["iterations_done"] == 10.0 and type(got["events"][0]["iterations_done"]) is float
    assert got["events"][0]["memory_mb"] is None and got["events"][0]["reason"] == ""
    assert got["events"][0]["failure_kind"] == ""
    assert got["heartbeat"]["report_latency_s"] == 0.0
    first, second = check({"node": "n"}), check({"node": "n"})
    assert first == {"node": "n", "logs": [], "events": [], "heartbeat": None, "after": None}
    assert first is not None and second is not None and first["logs"] is not second["logs"]


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b["events"][0].update(generation=True),  # a boolean is no integer
        lambda b: b["events"][0].update(iterations_done=float("inf")),
        lambda b: b["events"][0].update(iter_time_s=0),  # must be > 0
        lambda b: b["logs"][0].update(run="   "),  # blank after trimming
        lambda b: b["logs"][0].update(data="a\x00"),
        lambda b: b["logs"][0].update(data="\udc80"),
        lambda b: b["heartbeat"]["gpus"].append(dict(b["heartbeat"]["gpus"][0])),  # an index twice
        lambda b: b["heartbeat"].update(running={"job_id": 1}),  # not a list
        lambda b: b.pop("node"),  # required
        lambda b: b.update(events=[b["events"][0]] * 501),  # over MAX_BATCH_EVENTS
    ],
)
def test_a_body_drf_refuses_is_referred_to_it(change: Any) -> None:
    body = valid_report(n=1)
    change(body)
    assert drf(body) is None
    assert quick_validator(BatchReportSerializer)(body) is None


def test_the_plain_fields_are_checked_without_drf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built anew with DRF's validation out of order, the check still takes the agents' bodies:
    none of their fields is left to DRF (so the check is what saves the time)."""

    def refuse(self: Any, data: Any = None) -> Any:
        raise AssertionError(f"DRF asked to validate {type(self).__name__}")

    for kind in (Field, serializers.CharField, serializers.Serializer, serializers.ListSerializer):
        monkeypatch.setattr(kind, "run_validation", refuse)
    check = field_check(BatchReportSerializer())
    body = valid_report(n=2)
    for item in body["events"]:  # every field given: an absent one takes its default from DRF
        item.update(reason="r", memory_mb=1.5, failure_kind="oom")
    assert check(body)["events"][1]["failure_kind"] == "oom"
