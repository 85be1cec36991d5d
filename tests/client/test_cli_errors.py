"""A user's mistakes the command reports in one line with the documented exit status (an API URL
that is not the service's or has no host, an https:// URL of a plain-HTTP service, a job file that
nests without end or expands through aliases, a config file that is not UTF-8, ``login`` off a
terminal without a token or with one of SHAREWISE_TOKEN, a token that is not ASCII, a ``--tail``
past its bound or of long lines), and a reader that closes the pipe early (``| head -1``) or a
stream the shell closed, which end every command quietly, never stopping its work."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sharewise
from rest_framework.test import APIClient
from sharewise import Client, UsageError
from sharewise.errors import error_for

from cluster.joblogs import read_output
from cluster.models import Job
from scheduling import service as scheduler
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
    assert one_line(run("show", "999999"), 3) == "sharewise: error: job 999999: not found"  # its 404
    # named as cancel names it (it said "not found" alone)
    assert one_line(run("logs", "999999"), 3) == "sharewise: error: job 999999: not found"


def test_an_api_url_whose_host_the_service_refuses_is_a_usage_error(run: Run, service: Service) -> None:
    # the loopback address as a number reaches the service, whose ALLOWED_HOSTS does not list it:
    # Django's HTML "Bad Request (400)" was dumped and the exit status was 4 (refused)
    api = service.url.replace("localhost", "2130706433")
    port = urlsplit(api).port
    assert one_line(run("--api", api, "whoami"), 2) == (
        f"sharewise: error: {api} refused the host name of this URL: host"
        f" '2130706433:{port}' is not in this server's ALLOWED_HOSTS setting: use a host name it"
        " lists, or add '2130706433' to ALLOWED_HOSTS on the server"
    )
    # below a path outside /api/ the refusal is Django's bare page: still the URL's fault
    assert one_line(run("--api", f"{api}/healthz", "whoami"), 2) == (
        f"sharewise: error: {api}/healthz answered HTTP 400 with no Sharewise error body (for"
        " /healthz/api/v1/tenant/): it is probably not the service's base URL, or the service does"
        " not admit this host name (its ALLOWED_HOSTS setting)"
    )


def test_an_api_url_with_the_api_prefix_reaches_the_service(run: Run, service: Service) -> None:
    # http://host:8000/api/v1/ copied from the API's pages: the client added the prefix again, so
    # every call was the service's own JSON 404 and `list` said "not found" (exit 3)
    for url in (f"{service.url}/api/v1", f"{service.url}/api/v1/"):
        listed = run("--api", url, "list", "-o", "json")
        assert listed.code == 0, listed.err
        assert json.loads(listed.out) == []


@pytest.mark.parametrize("suffix", ["/api", "/api/", "/api/v1/jobs", "/api/v2", "/dashboard"])
@pytest.mark.parametrize("command", [("list",), ("show", "1"), ("whoami",)])
def test_an_api_url_answering_the_services_own_404_everywhere_is_a_usage_error(
    run: Run, service: Service, suffix: str, command: tuple[str, ...]
) -> None:
    # the service answers {"error": "not found"} for any path under /api/ (and /dashboard/api/),
    # so http://host:8000/api/v2 made every command "not found" (exit 3: no such job)
    api = f"{service.url}{suffix}".rstrip("/")
    asked = {"list": "jobs/", "show": "jobs/1/", "whoami": "tenant/"}[command[0]]
    base = urlsplit(api).path
    also = "" if asked == "tenant/" else f" and for {base}/api/v1/tenant/"
    assert one_line(run("--api", f"{service.url}{suffix}", *command), 2) == (
        f"sharewise: error: {api} does not look like a Sharewise API: it answered 'not found' for"
        f" {base}/api/v1/{asked}{also}, which the service always has; pass the service's base URL,"
        f" probably {service.url}"
    )


def test_a_missing_job_is_not_found_at_the_right_api_url(run: Run, service: Service) -> None:
    job_id = submitted(run("submit", *JOB_FLAGS))
    missing = run("cancel", "999998", str(job_id), "999999")
    assert missing.code == 3
    assert missing.err.splitlines() == [
        "sharewise: error: job 999998: not found",
        "sharewise: error: job 999999: not found",
    ]
    assert one_line(run("show", "999999"), 3) == "sharewise: error: job 999999: not found"


def test_an_https_url_of_a_plain_http_service_is_one_line_asking_for_http(run: Run, service: Service) -> None:
    # TLS's "wrong version number" carries its reason as a string, which the search of the
    # error's causes took for an exception: "internal error: AttributeError"
    plain = service.url.removeprefix("http://")
    assert one_line(run("--api", f"https://{plain}", "list"), 1) == (
        f"sharewise: error: cannot reach https://{plain}: could not speak TLS to {plain};"
        f" is it http://{plain}?"
    )


@pytest.mark.parametrize("url", ["http:///api/v1", "http://", "https://:8000/", "http:///"])
def test_an_api_url_without_a_host_says_so(run: Run, url: str) -> None:
    # it said the URL must start with http:// or https://, which it does
    assert one_line(run("--api", url, "list"), 2) == (
        f"sharewise: error: the API URL {url!r} has no host: give it like http://host:8000"
    )
    assert one_line(run("--api", "ftp://host", "list"), 2) == (
        "sharewise: error: the API URL must start with http:// or https://, got 'ftp://host'"
    )


def test_a_4xx_page_that_is_not_the_apis_error_is_quoted_on_one_line() -> None:
    page = "<html>\n<body>\n  <h1>Method Not Allowed</h1>\n</body>\n</html>\n"
    assert str(error_for(405, page)) == "HTTP 405: <html> <body> <h1>Method Not Allowed</h1> </body> </html>"


# ------------------------------------------------------------------ job files that nest without end

ITSELF = "contains itself (in YAML, an alias *a inside its own anchor &a)"


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("r.yaml", "a: &a [*a]\n", f"a {ITSELF}"),
        ("m.yaml", "name: x\nb: &b {c: [1, *b]}\n", f"b {ITSELF}"),
        ("deep.yaml", "a: " + "[" * 40 + "]" * 40 + "\n", "a nests more than 32 lists or mappings deep"),
    ],
)
def test_a_job_file_that_refers_to_itself_or_nests_deeply_is_a_usage_error(
    run: Run, tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert one_line(run("submit", str(path)), 2) == f"sharewise: error: job file {path}: {problem}"
    assert Job.objects.count() == 0


def laughs(levels: int) -> str:
    """YAML's "billion laughs": each of ``levels`` lists holds the one before it nine times (by
    alias), so the last one stands for 9**levels strings in a file of a few hundred characters."""
    names = "abcdefghijklmnopqrstuvwxyz"[:levels]
    lines = [f"a: &a [{', '.join(['lol'] * 9)}]"]
    lines += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip(names, names[1:], strict=False)]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when the block runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_job_file_of_aliases_that_expand_without_end_is_refused_at_once(run: Run, tmp_path: Path) -> None:
    # 9**9 strings through aliases: the check walked every one (for hours); now it stops after
    # 10,000 values, in the field where they ran out (a to d hold 8,302, e 66,430)
    problem = "e holds more than 10,000 values (in YAML, perhaps aliases *a repeating an anchor &a)"
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(9))
    with within(20):
        assert one_line(run("submit", str(path)), 2) == f"sharewise: error: job file {path}: {problem}"
        jobs = tmp_path / "jobs.yaml"
        jobs.write_text("- " + laughs(9).replace("\n", "\n  "))
        assert one_line(run("submit-many", str(jobs)), 2) == (
            f"sharewise: error: jobs file {jobs}, job 0: {problem}"
        )
    assert Job.objects.count() == 0


def test_a_job_file_may_share_a_value_through_an_alias(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "- {name: a, model: m, batch_size: 8, iterations: 1, gpus: 1, gpu_types: &t [v100]}\n"
        "- {name: b, model: m, batch_size: 8, iterations: 1, gpus: 1, gpu_types: *t}\n"
    )
    done = run("submit-many", str(path), "-q")
    assert done.code == 0, done.err
    assert [job.gpu_types for job in Job.objects.order_by("pk")] == [["v100"], ["v100"]]


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_a_job_file_nested_thousands_deep_is_a_usage_error(run: Run, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}\n")
    assert one_line(run("submit", str(path)), 2) == (
        f"sharewise: error: job file {path} nests lists or mappings too deeply to read"
    )
    deep_set = one_line(run("submit", *JOB_FLAGS, "--set", "a=" + "[" * 5000 + "]" * 5000), 2)
    assert deep_set == "sharewise: error: --set a: the value nests too deeply to read"


def test_the_python_api_refuses_a_value_that_contains_itself(service: Service) -> None:
    loop: list[object] = []
    loop.append(loop)
    with Client(service.url, service.alice, retries=0) as client:
        with pytest.raises(UsageError, match=r"^job: gpu_types contains itself"):
            client.submit({"name": "x", "gpu_types": loop})


# ------------------------------------------------------------------ the config file, login


def test_a_config_file_that_is_not_utf8_is_a_usage_error_naming_it(
    run: Run, service: Service, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"  # the run fixture's SHAREWISE_CONFIG
    config.write_bytes(b'{"api": "\xff\xfe"}\n')
    assert one_line(run("list", env=False), 2) == (
        f"sharewise: error: config file {config} is not UTF-8 text; run 'sharewise login' again"
    )
    # and the advice works: login rewrites the file instead of refusing to read it
    again = run("login", "--api", service.url, "--token-stdin", stdin=service.alice + "\n", env=False)
    assert again.code == 0, again.err
    assert json.loads(config.read_text())["token"] == service.alice


def test_login_off_a_terminal_without_a_token_says_how_to_give_one(run: Run, service: Service) -> None:
    no_token = run("login", "--api", service.url, stdin="", env=False)  # stdin: not a terminal
    assert one_line(no_token, 2) == (
        "sharewise: error: no token: standard input is not a terminal and holds none;"
        " pipe it in with 'sharewise login --token-stdin'"
    )
    assert no_token.out == ""
    no_url = run("login", stdin=service.alice + "\n", env=False)
    assert one_line(no_url, 2) == "sharewise: error: no API URL: give it with 'sharewise login --api URL'"
    piped = run("login", "--api", service.url, stdin=service.alice + "\n", env=False)
    assert (piped.code, piped.err) == (0, "") and "tenant team-a" in piped.out


def test_login_off_a_terminal_takes_the_token_of_sharewise_token(
    run: Run, service: Service, tmp_path: Path
) -> None:
    # SHAREWISE_TOKEN=... sharewise login --api URL < /dev/null said "no token": login read
    # only standard input off a terminal, though every other command takes the variable
    config = tmp_path / "config.json"
    from_env = run("login", "--api", service.url, stdin="")  # SHAREWISE_TOKEN: Alice's
    assert (from_env.code, from_env.err) == (0, ""), from_env.err
    assert from_env.out == (
        f"Logged in to {service.url} as a member of tenant team-a (the token of SHAREWISE_TOKEN);"
        f" saved in {config}\n"
    )
    assert json.loads(config.read_text()) == {"api": service.url, "token": service.alice}
    # --token-stdin and --token come first, as a flag does before the variable everywhere
    piped = run("login", "--api", service.url, "--token-stdin", stdin=service.charlie + "\n")
    assert piped.code == 0 and "tenant team-c" in piped.out
    assert json.loads(config.read_text())["token"] == service.charlie
    flag = run("--token", service.charlie, "login", "--api", service.url, token=service.alice)
    assert flag.code == 0 and "tenant team-c" in flag.out and "SHAREWISE_TOKEN" not in flag.out


@pytest.mark.parametrize("token", ["tök€n", "tok\x07en"], ids=["not-latin-1", "control"])
def test_a_token_that_is_not_printable_ascii_is_a_usage_error(
    run: Run, service: Service, tmp_path: Path, token: str
) -> None:
    # requests encodes headers in latin-1: "internal error: UnicodeEncodeError"
    problem = (
        "sharewise: error: the API token holds a character that is not printable ASCII"
        " (tokens are ASCII letters and digits): check what was pasted"
    )
    assert one_line(run("--token", token, "list"), 2) == problem
    assert one_line(run("list", token=token), 2) == problem  # SHAREWISE_TOKEN
    login = run("login", "--api", service.url, "--token-stdin", stdin=token + "\n", env=False)
    assert one_line(login, 2) == problem
    assert not (tmp_path / "config.json").exists()


# ------------------------------------------------------------------ logs --tail


def test_logs_bounds_tail_itself(run: Run) -> None:
    job_id = submitted(run("submit", *JOB_FLAGS))
    assert one_line(run("logs", str(job_id), "--tail", "99999999999999999999"), 2) == (
        "sharewise: error: Invalid value for '--tail': 99999999999999999999 is not in the range"
        " 1<=x<=1000000. (see 'sharewise logs --help')"
    )
    assert run("logs", str(job_id), "--tail", "1000000").code == 0


def job_with_output(run: Run, service: Service, text: str) -> int:
    """A running job (submitted, placed by a round) whose agent has sent ``text`` as its output."""
    job_id = submitted(run("submit", *JOB_FLAGS))
    scheduler.set_dispatcher(lambda messages: None)  # placements go nowhere: no agent here
    try:
        scheduler.run_round(policy="sjf")
    finally:
        scheduler.set_dispatcher(None)
    nodes = []
    for token in service.node_tokens.values():
        node = APIClient()
        node.credentials(HTTP_AUTHORIZATION=f"Node {token}")
        nodes.append(node)
    url = f"/api/v1/agent/jobs/{job_id}/logs/"
    for start in range(0, len(text), 3000):  # chunks of at most 4,000 characters, as agents send
        body = {"run": "r1", "offset": start, "data": text[start : start + 3000]}
        # the node the job was placed on takes it; the other answers 403
        assert 200 in [node.post(url, body, format="json").status_code for node in nodes]
    return job_id


def test_logs_tail_prints_the_last_lines_of_a_log_longer_than_one_answer(
    run: Run, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = job_with_output(run, service, "".join(f"line {i:04d}\n" for i in range(3000)))
    # answers of 1,000 characters, so the first one from the end (4 KiB back) is not the end
    monkeypatch.setattr("cluster.job_views.read_output", functools.partial(read_output, limit=1000))
    assert run("logs", str(job_id), "--tail", "3").out == "line 2997\nline 2998\nline 2999\n"


@pytest.mark.parametrize("limit", [1000, 262_144], ids=["small-answers", "one-answer"])
def test_logs_tail_prints_whole_lines_longer_than_its_guess(
    run: Run, service: Service, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # 40 lines of 2,001 characters: the guess of 400 a line (4 KiB for 5 lines) held two lines
    # and the end of a third, and --tail 5 printed those, the first cut in the middle
    lines = [f"{i:04d} " + "x" * 1995 + "\n" for i in range(40)]
    job_id = job_with_output(run, service, "".join(lines))
    monkeypatch.setattr("cluster.job_views.read_output", functools.partial(read_output, limit=limit))
    assert run("logs", str(job_id), "--tail", "5").out == "".join(lines[-5:])
    assert run("logs", str(job_id), "--tail", "39").out == "".join(lines[1:])
    assert run("logs", str(job_id), "--tail", "100").out == "".join(lines)  # the start of the log


# ------------------------------------------------------------------ a reader that closes the pipe


def command_env(service: Service, tmp_path: Path, unbuffered: bool) -> dict[str, str]:
    """The environment of ``python -m sharewise`` run as Alice against ``service``; with
    ``unbuffered`` each write reaches the pipe at once, so the command itself sees it broken."""
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(sharewise.__file__).parents[1]),
        "SHAREWISE_API": service.url,
        "SHAREWISE_TOKEN": service.alice,
        "SHAREWISE_CONFIG": str(tmp_path / "config.json"),
    }
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", ["show", "list"])
def test_a_reader_that_closes_the_pipe_ends_every_command_quietly(
    run: Run, service: Service, tmp_path: Path, command: str, unbuffered: bool
) -> None:
    job_id = submitted(run("submit", *JOB_FLAGS))
    argv = ["show", str(job_id)] if command == "show" else ["list", "-o", "json"]
    process = subprocess.Popen(
        [sys.executable, "-m", "sharewise", "--retries", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=command_env(service, tmp_path, unbuffered),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader has gone before the first line (`| head -0`)
    err = process.stderr.read().decode()
    assert (process.wait(timeout=60), err) == (0, "")


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("cancel", "--help"), ("-h",)])
def test_help_and_version_end_quietly_when_the_reader_has_gone(
    service: Service, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    # `sharewise --help | true`: click's main turned the broken pipe of the group's own options
    # into status 1
    process = subprocess.Popen(
        [sys.executable, "-m", "sharewise", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=command_env(service, tmp_path, unbuffered=False),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert (process.wait(timeout=60), err) == (0, "")


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("streams", ["stdout", "stdout and stderr"])
def test_a_reader_that_closes_the_pipe_does_not_stop_a_command_naming_several_jobs(
    run: Run, service: Service, tmp_path: Path, streams: str, output: str
) -> None:
    # `sharewise cancel 1 2 3 4 | head -1`: the second line met the closed pipe and ended the
    # command there with status 0, leaving the jobs after it pending (and -o json, whose one
    # write comes at the end, lost the status of the job not found)
    job_ids = [submitted(run("submit", *JOB_FLAGS)) for _ in range(4)]
    argv = ["cancel", "-o", output, str(job_ids[0]), "999999", *map(str, job_ids[1:])]
    both = streams == "stdout and stderr"  # `2>&1 | head -1`: the failure's line meets it too
    process = subprocess.Popen(
        [sys.executable, "-m", "sharewise", "--retries", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if both else subprocess.PIPE,
        env=command_env(service, tmp_path, unbuffered=True),
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader has gone before the first line
    err = process.stderr.read().decode() if process.stderr is not None else None
    code = process.wait(timeout=60)
    assert sorted(Job.objects.filter(status="cancelled").values_list("pk", flat=True)) == job_ids
    assert code == 3  # job 999999's "not found", as with a reader
    if not both:
        assert err == "sharewise: error: job 999999: not found\n"


@pytest.mark.parametrize("closed", [0, 1], ids=["stdin", "stdout"])
def test_a_standard_stream_the_shell_closed_is_read_as_empty_and_written_to_nowhere(
    run: Run, service: Service, tmp_path: Path, closed: int
) -> None:
    # `sharewise login 0<&-` and `sharewise show 1 >&-`: Python starts with sys.stdin (or
    # sys.stdout) None, and the command ended in "internal error: AttributeError" or a traceback
    job_id = submitted(run("submit", *JOB_FLAGS))
    env = command_env(service, tmp_path, unbuffered=False)
    env.pop("SHAREWISE_TOKEN")

    def sharewise(*argv: str) -> tuple[int, str]:
        done = subprocess.run(
            [sys.executable, "-m", "sharewise", "--retries", "0", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=functools.partial(os.close, closed),
            timeout=60,
        )
        return done.returncode, done.stderr.decode()

    if closed == 0:
        assert sharewise("login", "--api", service.url) == (
            2,
            "sharewise: error: no token: standard input is not a terminal and holds none;"
            " pipe it in with 'sharewise login --token-stdin'\n",
        )
        assert sharewise("--token", service.alice, "submit", "-") == (
            2,
            "sharewise: error: job file - must hold a mapping of job fields (name: ..., gpus: ...),"
            " got nothing\n",
        )
    else:
        assert sharewise("--token", service.alice, "show", str(job_id)) == (0, "")
        assert sharewise("--token", service.alice, "cancel", str(job_id)) == (0, "")
        assert Job.objects.get(pk=job_id).status == "cancelled"
