"""The ``sharewise`` command: submit, list, follow and cancel jobs of your tenant (click).

Run ``sharewise --help`` or ``sharewise COMMAND --help``. The service and the token come from
``--api``/``--token``, else ``SHAREWISE_API``/``SHAREWISE_TOKEN``, else the file ``sharewise login``
writes (:mod:`sharewise.config`). Errors are one line on stderr (``sharewise: error: ...``, never a
traceback) and the exit status says what happened (:mod:`sharewise.errors`: 0 ok, 1 the service,
2 usage, 3 not found, 4 refused, 5 authentication, 6 throttled, 7 a watched job did not succeed).
A command naming several jobs (``cancel 3 4 5``) goes on past one that fails, like ``scancel``,
and exits with the most severe failure's status (:data:`SEVERITY`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from sharewise import __version__, pipes, render
from sharewise.api import TERMINAL, Client
from sharewise.config import config_path, normalise_api, read_config, write_config
from sharewise.errors import AuthError, JobEnded, NotFound, ServiceError, SharewiseError, UsageError
from sharewise.jobfile import merge, parse_sets, read_job_file, read_jobs_file
from sharewise.pipes import PipeSafeGroup, quiet_stdout

STATUSES = ("pending", "running", "succeeded", "failed", "cancelled")
#: The exit status of a command naming several jobs when some failed: the first of these that
#: occurred. A job whose fate is unknown (1: the service failed; 5, 6: refused before looking at
#: it) comes first, a job named wrongly (2, 3) next, and a job that had already finished (4) last,
#: so 4 alone tells a script that every job named has ended.
SEVERITY = (1, 5, 6, 2, 3, 4)
#: Most lines ``logs --tail`` asks for: the service keeps 1,000,000 characters of a job's output
#: (its default ``SHAREWISE_JOB_LOG_MAX_CHARS``), so no more lines than that, and the offset the
#: command sends for them (400 characters a line) stays well within the whole numbers the API
#: reads (below 2⁶³).
TAIL_MAX = 1_000_000

output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for people, json for scripts (the API's objects)",
)


class FiniteFloat(click.FloatRange):
    """A number option that refuses ``nan``, ``inf`` and ``-inf`` (JSON has no such numbers, and
    neither a time nor a wait can be one), within the bounds of :class:`click.FloatRange`."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return number


class State:
    """What the group's options say, and the client made from them on first use."""

    def __init__(self, api: str | None, token: str | None, retries: int = 4) -> None:
        self.api, self.token, self.retries = api, token, retries
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.api, self.token, retries=self.retries)
        return self._client


pass_state = click.make_pass_decorator(State)


@click.group(
    cls=PipeSafeGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--api", metavar="URL", help="the service, e.g. http://sharewise:8000 (default $SHAREWISE_API)")
@click.option(
    "--token", metavar="TOKEN", help="your API token (default $SHAREWISE_TOKEN; prefer the variable)"
)
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="tries again after a failed connection or a 5xx (waiting 1, 2, 4 s ...)",
)
@click.version_option(__version__, prog_name="sharewise")
@click.pass_context
def cli(ctx: click.Context, api: str | None, token: str | None, retries: int) -> None:
    """Submit, follow and cancel training jobs on a Sharewise GPU cluster.

    Exit status: 0 ok, 1 service unreachable or failing, 2 usage error, 3 no such job,
    4 request refused (invalid job, finished job), 5 not logged in or bad token,
    6 throttled, 7 a watched job failed or was cancelled.
    """
    ctx.obj = State(api, token, retries)


# --------------------------------------------------------------------------------- login, whoami


@cli.command()
@click.option(
    "--api",
    "api_url",
    metavar="URL",
    help="the service's base URL (not given: asked on a terminal, else $SHAREWISE_API or the saved one)",
)
@click.option("--token-stdin", is_flag=True, help="read the token from standard input (scripts)")
@pass_state
def login(state: State, api_url: str | None, token_stdin: bool) -> None:
    """Check a token against the service and save both in your config file (mode 0600).

    The token is --token, else (--token-stdin) the first line of standard input, else
    $SHAREWISE_TOKEN; else it is asked for on a terminal, and elsewhere it is the first line of
    standard input."""
    try:
        stored = read_config()
    except UsageError:  # a broken config file is what login rewrites, not a reason to refuse
        stored = {}
    default_api = api_url or state.api or os.environ.get("SHAREWISE_API") or stored.get("api")
    terminal = sys.stdin.isatty()
    if api_url:
        url = normalise_api(api_url)
    elif terminal:
        url = normalise_api(click.prompt("API URL", default=default_api or "http://127.0.0.1:8000"))
    elif default_api:
        url = normalise_api(default_api)
    else:  # no one to ask: a prompt would take the token's line, or end silently at no input
        raise UsageError("no API URL: give it with 'sharewise login --api URL'")
    # the variable, like the URL's, comes after the flags and before asking (every command reads it)
    from_env = os.environ.get("SHAREWISE_TOKEN", "").strip() if not (token_stdin or state.token) else ""
    if from_env:
        token = from_env
    elif token_stdin or (not state.token and not terminal):
        # off a terminal getpass warns that the input may be echoed and, at the end of the
        # input, ends the command without a word: read the line as --token-stdin does
        token = sys.stdin.readline().strip()
        if not token and not token_stdin:
            raise UsageError(
                "no token: standard input is not a terminal and holds none;"
                " pipe it in with 'sharewise login --token-stdin'"
            )
    else:
        token = state.token or click.prompt("API token", hide_input=True)
    if not token:
        raise UsageError("the token is empty")
    with Client(url, token, retries=state.retries) as client:
        tenant = client.tenant()
    path = write_config(url, token)
    whose = " (the token of SHAREWISE_TOKEN)" if from_env else ""
    click.echo(f"Logged in to {url} as a member of tenant {tenant.get('name')}{whose}; saved in {path}")


@cli.command()
@output_option
@pass_state
def whoami(state: State, output: str) -> None:
    """Your tenant: its quota and what it uses now."""
    tenant = state.client.tenant()
    if output == "json":
        render.dump_json(tenant)
        return
    use = tenant.get("usage") or {}
    jobs = use.get("jobs") or {}
    click.echo(f"tenant {tenant.get('name')} at {state.client.api}")
    click.echo(f"GPUs in use {use.get('gpus_in_use', 0)} of {use.get('guaranteed_gpus', 0)} guaranteed")
    click.echo("jobs " + ", ".join(f"{jobs.get(s, 0)} {s}" for s in STATUSES))


@cli.command()
@click.option(
    "--windows",
    metavar="LIST",
    help="GPU-hours over these windows ending now, e.g. 2h,24h or 30m,7d (default: the service's, 2h,24h)",
)
@output_option
@pass_state
def usage(state: State, windows: str | None, output: str) -> None:
    """Your tenant's quota standing (in use, borrowed, over quota; in total and per GPU type) and
    its GPU-hours over windows against its quota, with the cluster's Jain's index of each window."""
    tenant = state.client.tenant(windows)
    use = tenant.get("usage") or {}
    if output == "json":
        render.dump_json(use)
        return
    quota = use.get("quota") or {}
    standing = (
        "OVER QUOTA (no new job of yours starts beyond the cap)"
        if quota.get("over_quota")
        else "within quota"
    )
    render.emit(
        Text(f"tenant {tenant.get('name')}: {standing}"),
        render.quota_table(quota),
        render.gpu_hours_table(use.get("gpu_hours") or (), use.get("fairness") or ()),
    )


# --------------------------------------------------------------------------------- submit


@cli.command()
@click.argument("job_file", required=False, metavar="[FILE]")
@click.option("--name", help="1-64 lowercase letters, digits and inner hyphens")
@click.option("--model", help="the model, e.g. resnet50")
@click.option("--batch-size", type=int, help="global batch (samples)")
@click.option("--iterations", type=int, help="training iterations")
@click.option("--gpus", type=int, help="GPUs of the gang")
@click.option("--gpu-memory-mb", type=int, help="memory per GPU at the full batch (MB)")
@click.option("--iteration-time-s", type=FiniteFloat(), help="measured time of one iteration (s)")
@click.option("--command", "command", help="what the agent runs (no shell), e.g. 'python train.py'")
@click.option("--priority", type=int, help="-100 to 100 (default 0; higher goes first within your tenant)")
@click.option(
    "--gpu-type",
    "gpu_types",
    multiple=True,
    metavar="TYPE",
    help="a GPU type the job accepts, e.g. a100 (repeatable: any of them; default any type)",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="any other job field (repeatable)")
@click.option("--idempotency-key", metavar="KEY", help="default: a new UUID; reuse one to make re-runs safe")
@click.option("-q", "--quiet", is_flag=True, help="print only the job id")
@output_option
@pass_state
def submit(
    state: State,
    job_file: str | None,
    sets: Sequence[str],
    idempotency_key: str | None,
    quiet: bool,
    output: str,
    **flags: Any,
) -> None:
    """Submit a job: FILE is YAML or JSON with the API's job fields ('-' reads stdin), like an
    sbatch script; flags and --set override the file's fields.

    \b
    sharewise submit examples/jobs/steps.yaml
    sharewise submit --name bert-a --model bert-base --batch-size 32 --iterations 2000 \\
        --gpus 2 --command "python train.py --lr 3e-4"
    """
    flags["gpu_types"] = list(flags["gpu_types"]) or None  # no --gpu-type: the file's, or any
    fields = merge(read_job_file(job_file) if job_file else {}, flags, parse_sets(sets))
    if not fields:
        raise UsageError("nothing to submit: give a job FILE or the fields as flags (see --help)")
    job = state.client.submit(fields, idempotency_key)
    if output == "json":
        render.dump_json(job)
    elif quiet:
        click.echo(job["id"])
    else:
        click.echo(f"Submitted job {job['id']} ({job.get('name')}), {job.get('status')}")


@cli.command("submit-many")
@click.argument("jobs_file", metavar="FILE")
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="a field set on every job (repeatable)"
)
@click.option(
    "--idempotency-prefix",
    metavar="PREFIX",
    help="job i gets the key PREFIX-i, so a re-run makes none twice (default: a new UUID each)",
)
@click.option("-q", "--quiet", is_flag=True, help="print only the job ids, one a line")
@output_option
@pass_state
def submit_many(
    state: State,
    jobs_file: str,
    sets: Sequence[str],
    idempotency_prefix: str | None,
    quiet: bool,
    output: str,
) -> None:
    """Submit every job in FILE at once: a YAML or JSON list of job-field mappings ('-' reads
    stdin), through the bulk endpoint (200 a request, each request all or nothing).

    \b
    sharewise submit-many sweep.yaml --set gpus=2 --idempotency-prefix sweep-1
    """
    overrides = parse_sets(sets)
    jobs = [merge(job, overrides) for job in read_jobs_file(jobs_file)]
    keys = [f"{idempotency_prefix}-{i}" for i in range(len(jobs))] if idempotency_prefix else None
    done = state.client.submit_many(jobs, keys)
    if output == "json":
        render.dump_json(done)
    elif quiet:
        click.echo("\n".join(str(job["id"]) for job in done))
    else:
        for job in done:
            click.echo(f"Submitted job {job['id']} ({job.get('name')}), {job.get('status')}")


# --------------------------------------------------------------------------------- list, queue, show


def fetch_active(client: Client) -> list[dict[str, Any]]:
    """Running jobs, then pending ones (each newest first)."""
    return [job for status in ("running", "pending") for job in client.jobs(status=status)]


def print_jobs(jobs: list[dict[str, Any]], output: str, empty: str) -> None:
    if output == "json":
        render.dump_json(jobs)
    elif not jobs:
        click.echo(empty)
    else:
        render.emit(render.jobs_table(jobs))


@cli.command("list")
@click.option("--status", type=click.Choice(STATUSES), help="only jobs in this status")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="newest jobs shown")
@click.option("--all", "show_all", is_flag=True, help="every job (no limit)")
@output_option
@pass_state
def list_jobs(state: State, status: str | None, limit: int, show_all: bool, output: str) -> None:
    """Your tenant's jobs, newest first, with why each pending job waits."""
    jobs = state.client.jobs(status=status, limit=None if show_all else limit)
    print_jobs(jobs, output, "No jobs." if status is None else f"No {status} jobs.")


@cli.command()
@output_option
@pass_state
def queue(state: State, output: str) -> None:
    """Running and pending jobs (like squeue): where each runs, or why it waits and when it may start."""
    print_jobs(fetch_active(state.client), output, "No job is running or waiting.")


@cli.command()
@click.argument("job_id", type=int)
@click.option(
    "--events",
    "n_events",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="last events shown",
)
@output_option
@pass_state
def show(state: State, job_id: int, n_events: int, output: str) -> None:
    """One job: status, placement and sharing partner, why it waits, and its latest events."""
    with job_named(job_id):
        job = state.client.job(job_id)
        events = state.client.events(job_id, limit=n_events) if n_events else []
    if output == "json":
        render.dump_json({**job, "events": events})
        return
    render.emit(render.job_details(job), *([render.events_table(events)] if events else []))


# --------------------------------------------------------------------------------- cancel, logs


@contextlib.contextmanager
def job_named(job_id: int) -> Iterator[None]:
    """The service's 404 for one job (``not found``) as ``job N: not found``, the way ``cancel``
    and ``watch`` name the job they could not find. Raises :class:`NotFound` so."""
    try:
        yield
    except NotFound as exc:
        if str(exc).startswith(f"job {job_id}"):
            raise
        raise NotFound(exc.status, f"job {job_id}: {exc}", exc.fields) from None


def jobs_named(job_ids: Sequence[int]) -> str:
    """``"job 3"``, ``"jobs 3, 4"``."""
    return f"job{'s' if len(job_ids) > 1 else ''} {', '.join(str(j) for j in job_ids)}"


def refuses_every_request(exc: SharewiseError) -> bool:
    """Whether ``exc`` says nothing about its job: a refused token, or no answer at all."""
    return isinstance(exc, AuthError) or (isinstance(exc, ServiceError) and exc.status is None)


def for_each_job(job_ids: Sequence[int], act: Callable[[int], dict[str, Any]]) -> tuple[list[Any], int]:
    """``act`` on each of ``job_ids`` in order, going on past one that fails (like ``scancel``):
    each failure is one line on stderr naming its job. The answers of those that succeeded, and
    the exit status: 0, or the most severe failure's (:data:`SEVERITY`). An error that would
    refuse every request alike (a refused token, an unreachable service) stops there, with one
    more line naming the jobs not tried. A reader that has gone stops no job: the lines go
    through :func:`sharewise.pipes.echo`, and ``act`` should print with it too."""
    done: list[Any] = []
    codes: list[int] = []
    for n, job_id in enumerate(job_ids):
        try:
            done.append(act(job_id))
        except SharewiseError as exc:
            message = str(exc)
            named = message if message.startswith(f"job {job_id} ") else f"job {job_id}: {message}"
            pipes.echo(f"sharewise: error: {named}", err=True)
            codes.append(exc.exit_code)
            rest = job_ids[n + 1 :]
            if rest and refuses_every_request(exc):
                why = "the error above applies to every request"
                pipes.echo(f"sharewise: error: not tried: {jobs_named(rest)} ({why})", err=True)
                break
    rank = {code: i for i, code in enumerate(SEVERITY)}
    return done, min(codes, key=lambda code: rank.get(code, -1), default=0)


@cli.command()
@click.argument("job_ids", nargs=-1, required=True, type=int, metavar="ID...")
@output_option
@pass_state
def cancel(state: State, job_ids: Sequence[int], output: str) -> int:
    """Cancel pending or running jobs (a cancelled job stays cancelled; a finished one is refused).
    A job that fails does not stop the rest: the exit status is the most severe failure's."""

    def cancel_one(job_id: int) -> dict[str, Any]:
        job = state.client.cancel(job_id)
        if output != "json":  # as it happens, in order with the failures' lines
            pipes.echo(f"Cancelled job {job['id']} ({job.get('name')})")
        return job

    done, code = for_each_job(job_ids, cancel_one)
    if output == "json":
        with pipes.output_only():  # a reader gone keeps the status of the jobs that failed
            render.dump_json(done)  # the jobs cancelled; the failures are on stderr
    return code


@cli.command()
@click.argument("job_id", type=int)
@click.option("-f", "--follow", is_flag=True, help="keep printing new output until the job has ended")
@click.option(
    "--tail",
    type=click.IntRange(min=1, max=TAIL_MAX),
    metavar="N",
    help=f"start with the last N lines (at most {TAIL_MAX:,})",
)
@pass_state
def logs(state: State, job_id: int, follow: bool, tail: int | None) -> None:
    """The job's output (stdout and stderr), as its agents captured it."""
    with job_named(job_id):
        print_logs(state.client, job_id, follow, tail)


def print_logs(client: Client, job_id: int, follow: bool, tail: int | None) -> None:
    """:func:`logs`: the last ``tail`` lines or all of the output, then (``follow``) what comes
    until the job has ended."""
    offset = 0
    if tail is not None:
        text, offset = client.tail_logs(job_id, tail)
        sys.stdout.write(text)
    if not follow:
        if tail is None:
            while True:
                piece = client.logs(job_id, offset=offset)
                sys.stdout.write(piece.get("data", ""))
                if not piece.get("data"):
                    break
                offset = int(piece["next_offset"])
        sys.stdout.flush()
        return
    for text in client.follow_logs(job_id, offset):
        sys.stdout.write(text)
        sys.stdout.flush()


# --------------------------------------------------------------------------------- watch


@cli.command()
@click.argument("job_ids", nargs=-1, type=int, metavar="[ID...]")
@click.option(
    "--interval",
    type=FiniteFloat(min=0.2),
    default=2.0,
    show_default=True,
    help="seconds between refreshes",
)
@click.option("--count", type=click.IntRange(min=1), help="stop after this many refreshes")
@pass_state
def watch(state: State, job_ids: Sequence[int], interval: float, count: int | None) -> None:
    """Refresh the queue (or the jobs ID...) until Ctrl-C; with IDs, until they have all ended
    (exit status 7 when one of them did not succeed)."""
    client = state.client

    def snapshot() -> list[dict[str, Any]]:
        if not job_ids:
            return fetch_active(client)
        jobs, missing = [], []
        for job_id in job_ids:
            try:
                jobs.append(client.job(job_id))
            except NotFound:
                missing.append(job_id)
        if missing:  # every unknown id in one line, before watching anything
            raise NotFound(404, f"{jobs_named(missing)}: not found")
        return jobs

    def view(jobs: list[dict[str, Any]]) -> Group:
        stamp = datetime.now(UTC).strftime("%H:%M:%S UTC")
        header = Text(f"{client.api}  {stamp}  every {interval:g} s (Ctrl-C stops)", style="dim")
        body: Any = render.jobs_table(jobs) if jobs else Text("No job is running or waiting.")
        return Group(header, body)

    def ended(jobs: list[dict[str, Any]]) -> bool:
        return bool(job_ids) and all(j.get("status") in TERMINAL for j in jobs)

    jobs = snapshot()
    refreshes = 1
    out = render.console()
    live = Live(view(jobs), console=out, auto_refresh=False) if out.is_terminal else None
    if live is None:
        render.emit(view(jobs))  # piped: one table per refresh
    with live or contextlib.nullcontext():
        while not ended(jobs) and (count is None or refreshes < count):
            time.sleep(interval)
            jobs = snapshot()
            refreshes += 1
            if live is not None:
                live.update(view(jobs), refresh=True)
            else:
                render.emit("", view(jobs))
    failed = [j for j in jobs if job_ids and j.get("status") in TERMINAL and j.get("status") != "succeeded"]
    if failed:
        raise JobEnded(", ".join(f"job {j['id']} {j['status']}" for j in failed))


# --------------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None, exit: Callable[[int], Any] = sys.exit) -> None:
    """Run the command line; exit with its status (never a traceback unless SHAREWISE_DEBUG=1).
    A reader that closes the pipe early (``sharewise show 1 | head -1``) ends it quietly, and a
    standard stream the shell closed is the null device (:func:`sharewise.pipes.open_closed_streams`)."""
    pipes.open_closed_streams()
    code = run_cli(argv)
    try:
        sys.stdout.flush()  # a reader gone shows here, not as status 120 at the interpreter's exit
    except BrokenPipeError:
        quiet_stdout()
    exit(code)


def run_cli(argv: Sequence[str] | None) -> int:
    """Run the command line; its exit status, each failure reported in one line on stderr."""
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None, prog_name="sharewise", standalone_mode=False
        )
    except SharewiseError as exc:
        pipes.echo(f"sharewise: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:  # one line like every error (README), and where help is
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"sharewise: error: {exc.format_message()}{hint}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("", err=True)
        return 130
    except BrokenPipeError:  # before any command ran (PipeSafeGroup.invoke: within one)
        quiet_stdout()
        return 0
    except Exception as exc:  # a bug: one line, and the traceback only on request
        if os.environ.get("SHAREWISE_DEBUG") == "1":
            raise
        click.echo(
            f"sharewise: internal error: {type(exc).__name__}: {exc} (SHAREWISE_DEBUG=1 shows where)",
            err=True,
        )
        return 1
    return code if isinstance(code, int) else 0


__all__ = ["cli", "config_path", "main"]
