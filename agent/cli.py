"""Command line: ``python -m agent --node NAME --api URL --token=T [--emulate] [--speedup X]``.

Placements come by pull (long-polling the API, ``agent.puller``; the default without
``--broker``) or by push (the node's Celery queue, ``agent.consumer``): ``--transport``.

``--fleet NODESxGPUS`` emulates many nodes in one process (demos and tests): nodes
``<NAME>-00``, ``<NAME>-01``… (:func:`common.shapes.node_names`: the names of the simulator's and
``load_cluster``'s clusters when NAME is ``node``), each with GPUS declared GPUs. Bad arguments
print a message and exit with status 2. A node token the server refuses (401: wrong or
revoked; or 403 coded ``token_node_mismatch``: another node's token; or coded
``node_token_required``: the server did not receive the node token) stops the agent: it ends
its jobs, prints one line naming the problem and exits with status 3
(:data:`EXIT_TOKEN_REFUSED`); a 404 to its heartbeat, a path every server has, means ``--api``
is not the server's URL: it stops the same way with status 2 (:data:`EXIT_WRONG_API`). A 5xx
or an unreachable server is retried, never an exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kombu.transport import resolve_transport

from agent import __version__
from agent.core import Agent, route
from agent.executors import EmulatedExecutor, ExecutorFactory, SubprocessExecutor
from agent.gpus import discover_gpus, nvml_gpus
from agent.joblogs import LogBook
from agent.messages import ORDERS_MAX_WAIT_S
from agent.puller import Puller
from agent.reporter import (
    HttpTransport,
    NodeTokenNotSeen,
    Reporter,
    StopReporting,
    TokenMismatch,
    TokenRefused,
    WrongApi,
)
from agent.runner import Runner
from common.shapes import MAX_GPUS_PER_NODE, ShapeError, node_names, parse_shape

log = logging.getLogger("agent")

#: Exit status when the server refuses the node token (401): retrying cannot help **(ours)**.
EXIT_TOKEN_REFUSED = 3
#: Exit status when ``--api`` answers 404 to the heartbeat (not the server's URL): a bad argument.
EXIT_WRONG_API = 2
#: Most nodes one ``--fleet`` process emulates **(ours)**.
MAX_FLEET_NODES = 1000
#: How placements may arrive (``--transport``; the server's ``SHAREWISE_AGENT_TRANSPORT``).
TRANSPORTS = ("pull", "push")
# The server's rule for node names (cluster.models.NAME_PATTERN), kept here because the agent
# must not import Django.
_NODE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")


def _number(
    kind: type[int] | type[float], within: Callable[[float], bool], refusal: str
) -> Callable[[str], int | float]:
    """An argparse ``type`` reading a number of ``kind`` for which ``within`` holds; otherwise
    ``refusal`` with ``{}`` the text given (a text that is no number: ``not a number``)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not within(value):
            raise argparse.ArgumentTypeError(refusal.format(text))
        return value

    return parse


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse ``type`` accepting finite numbers > 0 of ``kind``."""
    return _number(kind, lambda value: 0 < value < math.inf, "must be > 0, got {}")


#: A node's GPU count, 1 … :data:`~common.shapes.MAX_GPUS_PER_NODE` (the server refuses a
#: heartbeat listing more, so the agent would report in vain for ever).
_gpus = _number(
    int, lambda value: 1 <= value <= MAX_GPUS_PER_NODE, f"a node has 1 to {MAX_GPUS_PER_NODE} GPUs, got {{}}"
)
#: A poll's wait, 0 … :data:`~agent.messages.ORDERS_MAX_WAIT_S` s.
_wait = _number(
    float, lambda value: 0 <= value <= ORDERS_MAX_WAIT_S, f"must be 0-{ORDERS_MAX_WAIT_S:g} s, got {{}}"
)


def parser() -> argparse.ArgumentParser:
    """The agent's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m agent",
        description="Sharewise node agent: applies its node's placements (pulled from the API, or pushed "
        "on its Celery queue), runs the jobs and reports them to the API (docs/AGENT.md).",
    )
    p.add_argument("--node", help="node name (with --fleet: prefix of the node names, default 'node')")
    p.add_argument(
        "--api", required=True, help="base URL of the Sharewise server, e.g. http://127.0.0.1:8000"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("SHAREWISE_NODE_TOKEN"),
        help="node token (default: $SHAREWISE_NODE_TOKEN); with --fleet, for nodes not in --token-file",
    )
    p.add_argument(
        "--token-file",
        help='JSON file {"node-00": "token", ...}: one token per node (fleets of registered nodes)',
    )
    p.add_argument(
        "--broker", default=os.environ.get("REDIS_URL"), help="Celery broker URL (default: $REDIS_URL)"
    )
    p.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default=os.environ.get("SHAREWISE_AGENT_TRANSPORT") or None,
        help="how placements arrive: pull (long-poll the API) or push (the broker's queue node.<NAME>); "
        "default $SHAREWISE_AGENT_TRANSPORT, else push with a broker and pull without",
    )
    p.add_argument(
        "--poll-wait-s",
        type=_wait,
        default=25.0,
        help=f"pull: seconds one poll waits on the server for an order (0-{ORDERS_MAX_WAIT_S:g}, default 25)",
    )
    p.add_argument(
        "--emulate", action="store_true", help="emulate jobs from their profile instead of running them"
    )
    p.add_argument(
        "--speedup",
        type=_positive(float),
        default=1.0,
        help="with --emulate: job seconds per wall second (default 1)",
    )
    p.add_argument(
        "--fleet", metavar="NODESxGPUS", help="emulate NODES nodes of GPUS GPUs each (implies --emulate)"
    )
    p.add_argument(
        "--gpus",
        type=_gpus,
        help=f"declare N GPUs (1-{MAX_GPUS_PER_NODE}) instead of discovering them with NVML",
    )
    p.add_argument(
        "--gpu-memory-mb",
        type=_positive(int),
        default=49_140,
        help="memory of each declared GPU, MB (default 49140, the paper's testbed)",
    )
    p.add_argument("--heartbeat-s", type=_positive(float), default=5.0, help="seconds between heartbeats")
    p.add_argument("--progress-s", type=_positive(float), default=5.0, help="seconds between progress events")
    p.add_argument("--tick-s", type=_positive(float), default=0.5, help="seconds between steps of the jobs")
    p.add_argument(
        "--stop-grace-s",
        type=_positive(float),
        default=10.0,
        help="seconds a stopped job gets between SIGTERM and SIGKILL",
    )
    p.add_argument(
        "--log-dir",
        default=os.environ.get("SHAREWISE_AGENT_LOG_DIR"),
        help="also keep each job's output in DIR/job-<id>.log, rotated (default $SHAREWISE_AGENT_LOG_DIR; "
        "none: only on the server)",
    )
    p.add_argument(
        "--log-file-mb",
        type=_positive(float),
        default=10.0,
        help="rotate a job's local log at this size (MB)",
    )
    p.add_argument(
        "--log-backups", type=int, default=3, help="rotated local logs kept per job, .1 newest (default 3)"
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--version", action="version", version=f"sharewise-agent {__version__}")
    return p


@dataclass
class Setup:
    """What ``main`` runs: the agents, their runner, and how placements arrive: ``transport``
    ``pull`` (``puller``) or ``push`` (from ``broker``)."""

    agents: list[Agent]
    runner: Runner
    transport: str
    broker: str
    puller: Puller | None


def node_tokens(
    path: str | None, default: str | None, names: list[str], p: argparse.ArgumentParser
) -> dict[str, str]:
    """Each node's token: from the JSON file at ``path`` (an object node → token), else ``default``.

    Exits with status 2 (``p.error``) when the file is unreadable or malformed, or a node has no token.
    """
    tokens: dict[str, str] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                tokens = json.load(f)
        except (OSError, ValueError) as exc:
            p.error(f"cannot read --token-file {path}: {exc}")
        if not isinstance(tokens, dict) or not all(isinstance(v, str) and v for v in tokens.values()):
            p.error(f"--token-file {path} must hold a JSON object of node name → non-empty token")
    missing = [n for n in names if not tokens.get(n) and not default]
    if missing:
        p.error(
            f"no token for {', '.join(missing[:3])}: give --token=T, $SHAREWISE_NODE_TOKEN or --token-file"
        )
    return {n: tokens.get(n) or default or "" for n in names}


def writable_folder(path: str, p: argparse.ArgumentParser) -> None:
    """Make the folder ``path`` (``--log-dir``) if it is missing and check a file can be written
    in it; exits with status 2 (``p.error``) naming the cause when not — before, the agent started
    and each job's start only logged an ERROR that its output is not kept."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        p.error(f"--log-dir {path}: cannot keep job output there: {exc.strerror or exc}")


def build(args: argparse.Namespace, p: argparse.ArgumentParser) -> Setup:
    """Check ``args`` (``p.error`` exits with status 2 on a bad one) and build the agents."""
    # argparse checks --transport against its choices, not a default from $SHAREWISE_AGENT_TRANSPORT;
    # that one is read as the server reads it (any case), so both sides agree on "PUSH"
    transport = (args.transport or ("push" if args.broker else "pull")).strip().lower()
    if transport not in TRANSPORTS:
        p.error(f"$SHAREWISE_AGENT_TRANSPORT must be pull or push, got {args.transport!r}")
    if transport == "push":
        if not args.broker:
            p.error("--transport push needs a broker: --broker redis://HOST:6379/0 or $REDIS_URL")
        try:
            resolve_transport(args.broker.split("://", 1)[0] if "://" in args.broker else "")
        except (KeyError, ImportError) as exc:
            p.error(f"--broker {args.broker!r} names no Celery transport ({exc})")
    if not args.api.startswith(("http://", "https://")):
        p.error(f"--api must be an http:// or https:// URL, got {args.api!r}")
    if args.fleet:
        try:
            nodes, per_node = parse_shape(args.fleet, max_nodes=MAX_FLEET_NODES)
        except ShapeError as exc:
            p.error(f"--fleet {args.fleet!r}: {exc}")
        if args.gpus is not None:
            p.error("--gpus does not apply to --fleet NODESxGPUS (the GPUs per node are in it)")
        names = node_names(nodes, args.node or "node")
        declared: int | None = per_node
        emulate = True
    else:
        if not args.node:
            p.error("--node NAME is required (or --fleet NODESxGPUS)")
        names, declared, emulate = [args.node], args.gpus, args.emulate
        if emulate and declared is None:
            declared = 8
    for name in names:
        if not _NODE.match(name):
            p.error(f"node name {name!r}: use 1-64 lowercase letters, digits and inner hyphens")
    if args.speedup != 1.0 and not emulate:
        p.error("--speedup only applies to emulated jobs (--emulate or --fleet)")
    factory: ExecutorFactory = (
        partial(EmulatedExecutor, speedup=args.speedup)
        if emulate
        else partial(SubprocessExecutor, stop_grace_s=args.stop_grace_s)
    )
    tokens = node_tokens(args.token_file, args.token, names, p)
    if args.log_backups < 0:
        p.error(f"--log-backups must be >= 0, got {args.log_backups}")
    if args.log_dir:
        writable_folder(args.log_dir, p)
    agents = []
    for name in names:
        try:
            gpus = discover_gpus(name, declared, args.gpu_memory_mb)
        except ValueError as exc:
            p.error(str(exc))
        logs = LogBook(
            os.path.join(args.log_dir, name) if args.log_dir and args.fleet else args.log_dir,
            file_max_bytes=int(args.log_file_mb * 1_000_000),
            file_backups=args.log_backups,
        )
        agents.append(Agent(name, gpus, factory, progress_every_s=args.progress_s, logs=logs))
    transports = {a.node: HttpTransport(args.api, tokens[a.node]) for a in agents}
    reporters = [Reporter(transports[a.node]) for a in agents]
    probe = nvml_gpus if declared is None else None
    runner = Runner(
        agents, reporters, heartbeat_every_s=args.heartbeat_s, tick_s=args.tick_s, gpu_probe=probe
    )
    by_node = {a.node: a for a in agents}
    puller = (
        Puller(transports, partial(route, by_node), wait_s=args.poll_wait_s) if transport == "pull" else None
    )
    return Setup(agents, runner, transport, args.broker or "", puller)


def dashed_token_joined(argv: list[str]) -> list[str]:
    """``argv`` with ``--token -X…`` (a token that begins with one hyphen: ``token_urlsafe``
    draws one in 64) made ``--token=-X…``, which argparse would otherwise take for an unknown
    option ("expected one argument"). A value beginning with ``--`` is left alone: it may be a
    forgotten token followed by the next option (such a token goes as ``--token=TOKEN`` or in
    ``$SHAREWISE_NODE_TOKEN``)."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        value = next(it, None) if arg == "--token" else None
        if value is not None and value.startswith("-") and not value.startswith("--") and value != "-h":
            out.append(f"--token={value}")
        else:
            out += [arg] if value is None else [arg, value]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the agent until SIGTERM or Ctrl-C (push: the Celery worker's warm shutdown) or until
    the server refuses the node token (401, or 403 for another node's token); then stop every job
    and deliver what can be delivered; or until the heartbeat gets a 404 (``--api`` is not the
    server's URL). Returns the exit status: 0, :data:`EXIT_TOKEN_REFUSED` after such a refusal,
    :data:`EXIT_WRONG_API` after that 404."""
    p = parser()
    args = p.parse_args(dashed_token_joined(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    setup = build(args, p)
    stop = threading.Event()

    def refused(exc: StopReporting) -> None:  # from the loop's or the puller's thread
        stop.set()
        if setup.puller is None:  # push: the Celery worker holds the main thread
            from agent.consumer import stop_worker

            stop_worker()

    setup.runner.on_refused = refused
    if setup.puller is not None:
        setup.puller.on_refused = refused
    loop = threading.Thread(target=setup.runner.run, args=(stop,), name="agent-loop")
    loop.start()
    log.info(
        "agent for %s started (%s, placements by %s)",
        ", ".join(a.node for a in setup.agents),
        "emulated" if args.emulate or args.fleet else "subprocess",
        setup.transport,
    )
    try:
        if setup.puller is not None:
            pull_until_signalled(setup.puller, stop)
        else:
            from agent.consumer import make_app, register_apply_task, run_worker  # Celery is slow to import

            app = make_app(setup.broker)
            register_apply_task(app, {a.node: a for a in setup.agents})
            run_worker(app, [a.node for a in setup.agents], args.log_level)
    finally:
        stop.set()
        loop.join()
    exc = setup.runner.refused or (setup.puller.refused if setup.puller is not None else None)
    # sys.__stderr__: a Celery worker (push) leaves sys.stderr redirected into its logger
    if isinstance(exc, WrongApi):
        print(wrong_api_line(exc, args.api), file=sys.__stderr__ or sys.stderr)
        return EXIT_WRONG_API
    if isinstance(exc, TokenRefused):
        print(token_refused_line(exc), file=sys.__stderr__ or sys.stderr)
        return EXIT_TOKEN_REFUSED
    return 0


def wrong_api_line(exc: WrongApi, api: str) -> str:
    """The one line the agent ends with when the server at ``api`` (``--api``) answers 404 to
    the heartbeat, a path every Sharewise server has."""
    return (
        f"sharewise-agent: error: the API URL looks wrong: --api {api} answers 404 to the agent's "
        f"heartbeat ({exc}); give the server's base URL, without a path (e.g. http://HOST:8000)"
    )


def token_refused_line(exc: TokenRefused) -> str:
    """The one line the agent ends with when the server refuses its token (401, or a 403 for a
    token of another node, :class:`~agent.reporter.TokenMismatch`, or for credentials that were
    not its node token, :class:`~agent.reporter.NodeTokenNotSeen`)."""
    if isinstance(exc, TokenMismatch):
        return (
            f"sharewise-agent: error: the node token belongs to node {exc.token_node}, not "
            f"{exc.node}: start this agent with {exc.node}'s token (--token, $SHAREWISE_NODE_TOKEN "
            "or --token-file)"
        )
    node = f" of {exc.node}" if exc.node else ""
    said = " ".join(str(exc).split())  # the server's message, on one line
    if isinstance(exc, NodeTokenNotSeen):
        return (
            f"sharewise-agent: error: the server did not receive the node token{node} ({said}): "
            "something between the agent and the server (a proxy) replaces the agent's "
            "'Authorization: Node <token>' header; let it through unchanged"
        )
    return (
        f"sharewise-agent: error: the server refused the node token{node} ({said}): it is wrong or "
        "was revoked; start the agent again with the token the node's registration printed "
        "(--token, $SHAREWISE_NODE_TOKEN or --token-file)"
    )


def pull_until_signalled(puller: Puller, stop: threading.Event) -> None:
    """Run ``puller`` in a thread until SIGTERM or Ctrl-C (which set ``stop``). The poll in flight
    is not waited for (a long poll may take ``--poll-wait-s``); what it brings is not applied."""
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    thread = threading.Thread(target=puller.run, args=(stop,), name="agent-pull", daemon=True)
    thread.start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        stop.set()
    thread.join(timeout=1.0)
