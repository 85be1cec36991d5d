"""``manage.py set_password``: a tenant member's dashboard password set without a prompt (scripts,
CI), from a file, standard input or ``$SHAREWISE_PASSWORD``, never from the command line."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

PASSWORD = "violet-kettle-harbour-9"


def set_password(*args: str) -> str:
    err = io.StringIO()
    call_command("set_password", *args, stdout=io.StringIO(), stderr=err)
    return err.getvalue().strip()


def logs_in(username: str, password: str) -> bool:
    """Whether the dashboard's login form takes ``username`` / ``password``."""
    response = Client().post("/dashboard/login/", {"username": username, "password": password})
    return response.status_code == 302 and response["Location"] == "/dashboard/"


def test_from_a_file_the_member_logs_in(alice: Any, tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n")  # as `echo` writes it: the newline is not part of it
    said = set_password("alice", "--password-file", str(path))
    assert said == "Password of alice set (tenant view of team-a); log in at /dashboard/login/."
    assert logs_in("alice", PASSWORD) and not logs_in("alice", PASSWORD + "\n")


def test_from_stdin_and_from_the_environment(
    alice: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD))
    set_password("alice", "--password-file", "-")
    assert logs_in("alice", PASSWORD)
    monkeypatch.setenv("SHAREWISE_PASSWORD", "other-" + PASSWORD)
    set_password("alice")
    assert logs_in("alice", "other-" + PASSWORD) and not logs_in("alice", PASSWORD)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["alice"],
            None,
            r"give the password in a file \(--password-file FILE, - for stdin\) or in \$SHAREWISE_PASSWORD",
        ),
        (["nobody"], PASSWORD, "no user named 'nobody'"),
        (["alice"], "", "the password is empty"),
        (
            ["alice"],
            "12345678",
            "password refused: This password is too common. This password is entirely numeric.",
        ),
        (["alice"], "Env\udcffpass-word1", "the password is not valid UTF-8 text"),  # os.environ's b"\xff"
        (["alice"], PASSWORD + "\n", "the password holds a control character"),
        (["alice"], "violet\tkettle-9", "the password holds a control character"),
        (
            ["alice", "--password-file", "/nonexistent/pw"],
            None,
            "cannot read --password-file /nonexistent/pw",
        ),
    ],
)
def test_errors_say_what_is_wrong_and_change_nothing(
    alice: Any, monkeypatch: pytest.MonkeyPatch, args: list[str], env: str | None, message: str
) -> None:
    before = User.objects.get(username="alice").password
    monkeypatch.delenv("SHAREWISE_PASSWORD", raising=False)
    if env is not None:
        monkeypatch.setenv("SHAREWISE_PASSWORD", env)
    with pytest.raises(CommandError, match=message):
        set_password(*args)
    assert User.objects.get(username="alice").password == before


def test_there_is_no_password_argument(alice: Any) -> None:
    """A password given as an argument would be visible to every user of the machine (``ps``)."""
    with pytest.raises(CommandError, match="unrecognized arguments: --password"):
        set_password("alice", "--password", PASSWORD)


def test_a_second_final_newline_on_stdin_is_refused(alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``printf 'pw\\n\\n'``: one newline is dropped, the other would be part of a password no
    login form can type."""
    before = User.objects.get(username="alice").password
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n\n"))
    with pytest.raises(CommandError, match="control character"):
        set_password("alice", "--password-file", "-")
    assert User.objects.get(username="alice").password == before
