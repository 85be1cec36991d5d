"""Input the command refuses before sending anything: malformed options, one line, exit status 2."""

from __future__ import annotations

from collections.abc import Callable

from cluster.models import Job
from tests.client.conftest import Result

Run = Callable[..., Result]


def one_line_usage_error(result: Result) -> str:
    """The single line of a usage error (exit status 2), with nothing sent."""
    assert result.code == 2, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharewise: error: "), result.err
    assert result.out == "" and Job.objects.count() == 0
    return lines[0]


# ------------------------------------------------------------------ option errors: one line


def test_a_malformed_option_is_one_line_with_a_pointer_to_help(run: Run) -> None:
    line = one_line_usage_error(run("submit", "--gpus", "abc"))
    assert line == (
        "sharewise: error: Invalid value for '--gpus': 'abc' is not a valid integer."
        " (see 'sharewise submit --help')"
    )
    assert one_line_usage_error(run("nosuch")).startswith("sharewise: error: No such command 'nosuch'.")
