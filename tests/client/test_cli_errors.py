"""A user's mistakes the command reports in one line with the documented exit status (an API URL
that is not the service's)."""

from __future__ import annotations

from collections.abc import Callable

from sharewise.errors import error_for

from tests.client.conftest import Result, Service

Run = Callable[..., Result]

JOB_FLAGS = ("--name", "t", "--model", "m", "--batch-size", "8", "--iterations", "1", "--gpus", "1")


def one_line(result: Result, code: int) -> str:
    """The single line on stderr of a run that exited with ``code``."""
    assert result.code == code, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharewise: error: "), result.err
    return lines[0]


def submitted(result: Result) -> int:
    assert result.code == 0, result.err
    return int(result.out.split()[2])  # "Submitted job 12 (name), pending"


# ------------------------------------------------------------------ an API URL that is not the service's


def test_an_api_url_answering_a_404_page_is_a_usage_error_not_a_missing_job(
    run: Run, service: Service
) -> None:
    line = one_line(run("--api", f"{service.url}/healthz", "list"), 2)
    assert line == (
        f"sharewise: error: {service.url}/healthz answered HTTP 404 with no Sharewise error body"
        " (for /healthz/api/v1/jobs/): it is probably not the service's base URL, which is like"
        " http://host:8000"
    )
    assert one_line(run("show", "999999"), 3) == "sharewise: error: not found"  # the service's own 404


def test_a_4xx_page_that_is_not_the_apis_error_is_quoted_on_one_line() -> None:
    page = "<html>\n<body>\n  <h1>Method Not Allowed</h1>\n</body>\n</html>\n"
    assert str(error_for(405, page)) == "HTTP 405: <html> <body> <h1>Method Not Allowed</h1> </body> </html>"
