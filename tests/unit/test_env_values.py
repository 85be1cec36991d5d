"""Environment settings are read strictly (config/env_values.py): numbers by Python's own
``float()`` / ``int()`` and their bounds, booleans of the usual spellings, choices, DRF rates.

django-environ 0.14's float cast, used before, dropped every character but digits, signs and
separators: ``1e2`` read as 12.0, ``2.5e1`` as 2.51, ``0x10`` as 10.0, ``1,000`` as 1.0, ``5s``
as 5.0. The hand cases below are what Python's grammar says; the fresh-interpreter cases read
the real settings module (12.0 and friends on the old code)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.throttling import SimpleRateThrottle

from config import env_values

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15", 15.0),
        (" 15 ", 15.0),  # Python's float() ignores surrounding spaces
        ("15.5", 15.5),
        ("1e2", 100.0),  # accepted: Python's exponent, 1 x 10^2
        ("2.5e1", 25.0),
        ("1_000", 1000.0),  # Python's digit separator
        ("+3", 3.0),
        ("0", 0.0),
    ],
)
def test_numbers_are_pythons_floats(text: str, expected: float) -> None:
    assert env_values.parse_number(text) == expected


@pytest.mark.parametrize(
    "text", ["0x10", "1,000", "5s", "abc", "", " ", "1e2s", "nan", "NaN", "inf", "-inf", "1e400"]
)
def test_anything_else_is_refused(text: str) -> None:
    """Hex, thousands commas, units, words, empty; nan and inf (and 1e400, which is inf) are
    not finite, and no setting takes them."""
    with pytest.raises(ValueError, match="a number"):
        env_values.parse_number(text)


@pytest.mark.parametrize(
    ("text", "bounds", "ok"),
    [
        ("0", {"above": 0}, False),
        ("0.001", {"above": 0}, True),
        ("-5", {"minimum": 0}, False),
        ("0", {"minimum": 0}, True),
        ("3600", {"minimum": 0, "maximum": 3600}, True),
        ("3600.5", {"minimum": 0, "maximum": 3600}, False),
        ("-0.0", {"minimum": 0}, True),  # -0.0 == 0
    ],
)
def test_bounds(text: str, bounds: dict, ok: bool) -> None:
    if ok:
        assert env_values.parse_number(text, **bounds) == float(text)
    else:
        with pytest.raises(ValueError):
            env_values.parse_number(text, **bounds)


@pytest.mark.parametrize(("text", "expected"), [("5", 5), (" 7 ", 7), ("1_000", 1000), ("-2", -2)])
def test_whole_numbers(text: str, expected: int) -> None:
    value = env_values.parse_number(text, whole=True)
    assert value == expected and isinstance(value, int)


@pytest.mark.parametrize("text", ["5.0", "1e3", "0x10", "010x", "5 s", "nan"])
def test_whole_numbers_refuse_the_rest(text: str) -> None:
    with pytest.raises(ValueError, match="a whole number"):
        env_values.parse_number(text, whole=True)


def test_the_message_says_what_is_accepted() -> None:
    with pytest.raises(ValueError) as caught:
        env_values.parse_number("abc", above=0, unit="seconds")
    assert str(caught.value) == "a number of seconds > 0"
    with pytest.raises(ValueError) as caught:
        env_values.parse_number("abc", minimum=0, maximum=3600, unit="seconds")
    assert str(caught.value) == "a number of seconds from 0 to 3600"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("600/min", (600, 60)),
        ("20/s", (20, 1)),
        ("100000/s", (100000, 1)),
        ("5/hour", (5, 3600)),
        ("1/d", (1, 86400)),
    ],
)
def test_rates_agree_with_drf(text: str, expected: tuple[int, int]) -> None:
    """Hand values (a minute is 60 s), and DRF's own parse_rate gives the same."""
    assert env_values.parse_rate(text) == expected
    assert SimpleRateThrottle.parse_rate(SimpleRateThrottle.__new__(SimpleRateThrottle), text) == expected


@pytest.mark.parametrize(
    "text", ["lots", "600", "600/", "/min", "abc/min", "10/x", "1/2/s", "0/s", "-1/s", "1e3/s"]
)
def test_rates_drf_could_not_use_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="N/s"):
        env_values.parse_rate(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", True),
        ("True", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("FALSE", False),
        ("no", False),
        ("off", False),
    ],
)
def test_booleans(text: str, expected: bool) -> None:
    assert env_values.parse_bool(text) is expected


@pytest.mark.parametrize("text", ["maybe", "", "2", "ok", "enabled"])
def test_other_words_are_not_false(text: str) -> None:
    """django-environ read every unknown word as false."""
    with pytest.raises(ValueError, match="true or false"):
        env_values.parse_bool(text)


def test_readers_name_the_setting_and_keep_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SW_TEST_S", raising=False)
    assert env_values.seconds("SW_TEST_S", 15.0, above=0) == 15.0
    monkeypatch.setenv("SW_TEST_S", "abc")
    with pytest.raises(ImproperlyConfigured) as caught:
        env_values.seconds("SW_TEST_S", 15.0, above=0)
    assert str(caught.value) == "SW_TEST_S must be a number of seconds > 0; got 'abc'"
    monkeypatch.setenv("SW_TEST_S", "PUSH")
    assert env_values.choice("SW_TEST_S", "pull", ("pull", "push"), fold_case=True) == "push"
    with pytest.raises(ImproperlyConfigured, match="SW_TEST_S must be one of pull, push; got 'PUSH'"):
        env_values.choice("SW_TEST_S", "pull", ("pull", "push"))
    monkeypatch.setenv("SW_TEST_S", "700, 1e4")
    assert env_values.numbers("SW_TEST_S", [3200.0], above=0) == [700.0, 10000.0]
    monkeypatch.setenv("SW_TEST_S", "700,-1")
    with pytest.raises(
        ImproperlyConfigured, match="SW_TEST_S must be comma-separated numbers, each a number > 0"
    ):
        env_values.numbers("SW_TEST_S", [3200.0], above=0)


def test_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed entry of SHAREWISE_METRICS_ALLOW used to allow nothing, silently."""
    monkeypatch.setenv("SW_TEST_NETS", "127.0.0.1, 10.0.0.0/8,::1")
    assert env_values.networks("SW_TEST_NETS", []) == ["127.0.0.1", "10.0.0.0/8", "::1"]
    monkeypatch.setenv("SW_TEST_NETS", "127.0.0.1,localhost")
    with pytest.raises(ImproperlyConfigured, match="'localhost' is neither"):
        env_values.networks("SW_TEST_NETS", [])


def read_setting(name: str, **env: str) -> str:
    """``repr`` of setting ``name`` (or of a tuple: ``A, settings.B``) as a fresh interpreter reads
    it with ``env`` set."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHAREWISE_", "SECRET_KEY", "DEBUG"))}
    done = subprocess.run(
        [sys.executable, "-c", f"from django.conf import settings; print(repr((settings.{name})))"],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("SHAREWISE_ROUND_INTERVAL_S", "1e2", 100.0),  # django-environ: 12.0
        ("SHAREWISE_HEARTBEAT_TIMEOUT_S", "2.5e1", 25.0),  # django-environ: 2.51
    ],
)
def test_the_settings_read_numbers_as_python_does(name: str, value: str, expected: object) -> None:
    assert read_setting(name, **{name: value}) == repr(expected)


def test_defaults_are_unchanged() -> None:
    """The defaults of config/settings.py as they were (docs and .env.example give them)."""
    names = [
        "SHAREWISE_ROUND_INTERVAL_S",
        "SHAREWISE_HEARTBEAT_TIMEOUT_S",
        "SHAREWISE_SILENCE_ALLOWANCE_MAX_S",
        "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']",
        "SHAREWISE_SPLIT_CHARGE",
        "AXES_FAILURE_LIMIT",
        "SHAREWISE_TOKEN_CACHE_S",
        "SHAREWISE_TIRESIAS_THRESHOLDS",
        "SESSION_COOKIE_SECURE",
    ]
    got = read_setting(", settings.".join(names))
    assert got == repr((10.0, 15.0, 60.0, {"job_submit": "600/min"}, True, 5, None, [3200.0], False))
