"""Numbers in a query are ASCII digits alone, everywhere (``cluster.query_params``).

Python's ``int()`` reads ``"\u0661"`` (ARABIC-INDIC DIGIT ONE) as 1 and ``"  1"`` as 1: the agent
orders view (through DRF's ``IntegerField``/``FloatField``) and the dashboard accepted both, and
``?after=\u0661`` acknowledged (deleted) order 1, while ``/api/v1/jobs/?limit=\u0661`` was a 400.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.models import Node
from cluster.query_params import decimal_number, whole_number
from scheduling.models import AgentOrder
from scheduling.service import orders
from tests.api.conftest import JOBS_URL, job_body
from tests.api.test_agent_orders import URL, agent_client, start

ONE = "\u0661"  # ARABIC-INDIC DIGIT ONE
AFTER = "a whole number from 0 to 9223372036854775807"  # 2**63 - 1, the largest order number
WAIT = f"a number of seconds from 0 to {orders.MAX_WAIT_S:g}"
# what a decimal may be, in a 400's words: "ASCII digits (0-9)" was said, yet 1.5 and 1e3 are taken
DECIMAL = "written in ASCII as 5, 0.5, .5, 5. or 1e-3 (no sign, inf or nan; finite)"
LOG_WAIT = f"must be a number of 0 or more {DECIMAL}"
THREE_HUNDRED = "\u0663\u0660\u0660"


@pytest.mark.parametrize(
    ("text", "signed", "expected"),
    [("0", False, 0), ("300", False, 300), ("-5", True, -5), ("-5", False, None), (ONE, False, None),
     (" 300", False, None), ("300 ", False, None), ("300\n", False, None), ("", False, None),
     ("+5", False, None), ("1.0", False, None), ("1_000", False, None), ("9" * 20, False, None),
     ("\uff11", False, None),  # FULLWIDTH DIGIT ONE
     # bounded by the value, not the digits: leading zeros are fine, 2**63 is not
     ("0000000000000000000001", False, 1), ("-0000000000000000000005", True, -5),
     ("9223372036854775807", False, 2**63 - 1), ("9223372036854775808", False, None),
     ("-9223372036854775808", True, None), ("0" * 64, False, 0), ("0" * 65, False, None)],
)  # fmt: skip
def test_whole_number_takes_ascii_digits_alone(text: str, signed: bool, expected: int | None) -> None:
    assert whole_number(text, signed=signed) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0.0), ("25.0", 25.0), ("1e-05", 1e-05), ("2.", 2.0), (ONE, None), ("  1", None), ("1 ", None),
     ("-1", None), ("nan", None), ("inf", None), ("1e999", None), ("", None), ("\u0661.5", None),
     (".5", 0.5), (".25e1", 2.5), ("0.5", 0.5), (".", None), (".e5", None), ("-.5", None), ("..5", None),
     ("0" * 30 + "1.5", 1.5), ("1." + "0" * 30, 1.0), ("1e0002", 100.0), ("0" * 65, None)],
)  # fmt: skip
def test_decimal_number_takes_ascii_digits_alone(text: str, expected: float | None) -> None:
    assert decimal_number(text) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (f"after={ONE}", f"after: must be {AFTER} in ASCII digits (0-9), got '{ONE}'"),
        ("after=%201", f"after: must be {AFTER} in ASCII digits (0-9), got ' 1'"),
        # all digits, but more of them than any order number has: the bounds say why
        ("after=" + "9" * 23, f"after: must be {AFTER} in ASCII digits (0-9), got '{'9' * 23}'"),
        ("wait=%20%201", f"wait: must be {WAIT}, {DECIMAL}, got '  1'"),
        (f"wait={ONE}", f"wait: must be {WAIT}, {DECIMAL}, got '{ONE}'"),
    ],
)
def test_agent_orders_refuse_other_digits_and_acknowledge_nothing(
    cluster: list[Node], query: str, message: str
) -> None:
    agent = agent_client(cluster[0])
    orders.record_orders([start("node-00", 7, 1), start("node-00", 8, 1)])
    answer = agent.get(f"{URL}?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == f"invalid input: {message}"
    assert list(AgentOrder.objects.values_list("seq", flat=True).order_by("seq")) == [
        1,
        2,
    ]  # none acknowledged


def test_agent_orders_still_read_ascii_numbers(cluster: list[Node]) -> None:
    agent = agent_client(cluster[0])
    orders.record_orders([start("node-00", 7, 1), start("node-00", 8, 1)])
    answer = agent.get(f"{URL}?after=1&wait=0.0")
    assert answer.status_code == 200, answer.content
    assert [o["seq"] for o in answer.json()["orders"]] == [2]


def test_a_fraction_without_its_leading_zero_is_a_number(
    cluster: list[Node], alice_api: APIClient, alice_job: Any
) -> None:
    """Before: ``?wait=.5`` was a 400 (``must be a number ... in ASCII digits``) though it is half
    a second in ASCII digits, as people and many languages' number literals write it."""
    agent = agent_client(cluster[0])
    orders.record_orders([start("node-00", 7, 1), start("node-00", 8, 1)])
    answer = agent.get(f"{URL}?after=1&wait=.5")  # order 2 is there: answered at once
    assert answer.status_code == 200, answer.content
    assert [o["seq"] for o in answer.json()["orders"]] == [2]
    logs = alice_api.get(f"{JOBS_URL}{alice_job['id']}/logs/?wait=.0")
    assert logs.status_code == 200, logs.content


TOO_LONG = "is 65 characters long; a number here has at most 64, leading zeros included"


def test_agent_orders_read_a_zero_padded_cursor_as_its_value(cluster: list[Node]) -> None:
    """Before: ``?after=0000000000000000000001`` (22 digits, the value 1) was a 400 ``must be a
    whole number from 0 to 9223372036854775807``: the digits were bounded, not the value."""
    agent = agent_client(cluster[0])
    orders.record_orders([start("node-00", 7, 1), start("node-00", 8, 1)])
    answer = agent.get(f"{URL}?after=0000000000000000000001&wait=000.0")
    assert answer.status_code == 200, answer.content
    assert [o["seq"] for o in answer.json()["orders"]] == [2]
    assert list(AgentOrder.objects.values_list("seq", flat=True)) == [2]  # order 1 acknowledged


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("after=" + "0" * 65, TOO_LONG),
        ("wait=" + "0" * 65, TOO_LONG),
        (
            "after=" + "0" * 10_000,
            "is 10,000 characters long; a number here has at most 64, leading zeros included",
        ),
        ("after=9223372036854775808", f"must be {AFTER} in ASCII digits (0-9), got '9223372036854775808'"),
    ],
    ids=["after-65", "wait-65", "after-10000", "after-2**63"],
)
def test_agent_orders_refuse_a_number_too_long_saying_so(
    cluster: list[Node], query: str, detail: str
) -> None:
    agent = agent_client(cluster[0])
    orders.record_orders([start("node-00", 7, 1)])
    answer = agent.get(f"{URL}?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["fields"] == {query.partition("=")[0]: [detail]}
    assert AgentOrder.objects.count() == 1  # none acknowledged


def test_job_queries_read_leading_zeros_and_refuse_a_number_too_long(
    alice_api: APIClient, alice_job: Any
) -> None:
    logs = f"{JOBS_URL}{alice_job['id']}/logs/"
    assert alice_api.get(f"{logs}?offset=-{'0' * 30}1&wait=0{'0' * 30}").status_code == 200
    assert alice_api.get(f"{JOBS_URL}?limit={'0' * 30}1").json()["results"][0]["id"] == alice_job["id"]
    for url, name in [
        (f"{logs}?offset={'0' * 65}", "offset"),
        (f"{logs}?wait={'0' * 65}", "wait"),
        (f"{JOBS_URL}?limit={'0' * 65}", "limit"),
        (f"{JOBS_URL}?offset={'0' * 65}", "offset"),
    ]:
        answer = alice_api.get(url)
        assert answer.status_code == 400, (url, answer.content)
        assert answer.json()["fields"] == {name: [TOO_LONG]}


@pytest.mark.parametrize(
    ("query", "name", "detail"),
    [
        (f"offset={ONE}", "offset", f"must be an integer, got '{ONE}'"),
        ("offset=%20-1", "offset", "must be an integer, got ' -1'"),
        # an integer, out of range: said so (was "must be an integer")
        (
            "offset=-99999999999999999999",
            "offset",
            "must be an integer of absolute value below 2^63, got '-99999999999999999999'",
        ),
        (f"wait={ONE}", "wait", f"{LOG_WAIT}, got '{ONE}'"),
        ("wait=%201", "wait", f"{LOG_WAIT}, got ' 1'"),
        ("wait=inf", "wait", f"{LOG_WAIT}, got 'inf'"),
        ("wait=-1", "wait", f"{LOG_WAIT}, got '-1'"),  # was "must be a number": -1 is one
    ],
)
def test_job_logs_refuse_other_digits(
    alice_api: APIClient, alice_job: Any, query: str, name: str, detail: str
) -> None:
    answer = alice_api.get(f"{JOBS_URL}{alice_job['id']}/logs/?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["fields"] == {name: [detail]}


@override_settings(SHAREWISE_LOG_WAIT_MAX_S=0.2)
@pytest.mark.parametrize("wait", ["1.5", ".5", "1e308", "0001e2"])
def test_job_logs_take_any_finite_decimal_wait_bounded_by_the_setting(
    alice_api: APIClient, alice_job: Any, wait: str
) -> None:
    began = time.monotonic()
    answer = alice_api.get(f"{JOBS_URL}{alice_job['id']}/logs/?wait={wait}")
    assert answer.status_code == 200, answer.content
    assert answer.json()["data"] == ""
    assert time.monotonic() - began < 5  # 1e308 s is held to SHAREWISE_LOG_WAIT_MAX_S (0.2 s here)


def test_job_logs_refuse_a_wait_past_the_largest_double(alice_api: APIClient, alice_job: Any) -> None:
    answer = alice_api.get(f"{JOBS_URL}{alice_job['id']}/logs/?wait=1e309")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"wait": [f"{LOG_WAIT}, got '1e309'"]}


@pytest.mark.parametrize("query", [f"limit={ONE}", "limit=%20%205", f"offset={ONE}"])
def test_job_list_refuses_other_digits(alice_api: APIClient, query: str) -> None:
    answer = alice_api.get(f"{JOBS_URL}?{query}")
    name, raw = query.split("=")
    shown = {ONE: ONE, "%20%205": "  5"}[raw]
    bounds = "1 to 500" if name == "limit" else "0 to 1,000,000,000,000"
    assert answer.status_code == 400
    assert answer.json()["fields"] == {name: [f"must be a whole number from {bounds}, got {shown!r}"]}


@pytest.mark.parametrize("field", ["batch_size", "iterations", "gpus"])
def test_a_submitted_number_written_as_text_is_refused(alice_api: APIClient, field: str) -> None:
    """Request bodies take JSON numbers only (``cluster.fields.StrictIntegerField``): a string,
    ASCII or not, is a 400 (DRF's own ``IntegerField`` would read ``"\u0661"`` as 1)."""
    answer = alice_api.post(JOBS_URL, {**job_body(), field: ONE}, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {field: ["A valid integer is required."]}
