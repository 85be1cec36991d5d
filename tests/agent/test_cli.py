"""The command line: bad arguments exit 2 with a message and no traceback; fleets; a refused
token (401) stops the agent with status 3, a server error does not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.cli import EXIT_TOKEN_REFUSED, EXIT_WRONG_API, build, dashed_token_joined, node_tokens, parser

BASE = ["--api", "http://127.0.0.1:8000", "--token", "t", "--broker", "memory://"]


def setup(*argv: str):
    p = parser()
    return build(p.parse_args([*BASE, *argv]), p)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--emulate"], "--node NAME is required"),
        (["--fleet", "4by8"], "--fleet '4by8': cluster shape must look like NODESxGPUS"),
        (["--fleet", "0x8"], "--fleet '0x8': a cluster needs at least one node"),
        (["--fleet", "1001x8"], "--fleet '1001x8': at most 1,000 nodes, got 1,001"),
        (["--fleet", "2x8", "--gpus", "4"], "--gpus does not apply to --fleet"),
        (["--node", "a", "--emulate", "--speedup", "0"], "must be > 0"),
        (["--node", "a", "--gpus", "2", "--speedup", "5"], "--speedup only applies to emulated jobs"),
        (["--node", "a b", "--emulate"], "node name 'a b': use 1-64 lowercase"),
        (["--node", "Gpu-1", "--emulate"], "node name 'Gpu-1': use 1-64 lowercase"),
        (["--node", "a", "--gpus", "x"], "not a number"),
        # the server refuses a heartbeat of more than 64 GPUs (400), its body limit 100,000 (413)
        (["--node", "a", "--gpus", "65"], "argument --gpus: a node has 1 to 64 GPUs, got 65"),
        (["--node", "a", "--gpus", "100000"], "argument --gpus: a node has 1 to 64 GPUs, got 100000"),
        (["--node", "a", "--gpus", "0"], "argument --gpus: a node has 1 to 64 GPUs, got 0"),
        (["--node", "a", "--emulate", "--broker", "foo://x"], "names no Celery transport"),
        (["--node", "a", "--emulate", "--transport", "smoke"], "invalid choice: 'smoke'"),
        (["--node", "a", "--emulate", "--poll-wait-s", "31"], "must be 0-30 s, got 31"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as info:
        setup(*argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["/proc/nope", "a-file"])
def test_a_log_dir_that_cannot_be_written_exits_2_at_startup(
    bad: str, tmp_path, capsys: pytest.CaptureFixture
) -> None:
    """Before, the agent started and logged an ERROR only at its first job's start."""
    (tmp_path / "a-file").write_text("")
    folder = bad if bad.startswith("/") else str(tmp_path / bad / "sub")
    with pytest.raises(SystemExit) as info:
        setup("--node", "a", "--emulate", "--log-dir", folder)
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"python -m agent: error: --log-dir {folder}: cannot keep job output there: ")


def test_a_missing_log_dir_is_made_at_startup(tmp_path) -> None:
    setup("--node", "a", "--emulate", "--log-dir", str(tmp_path / "new" / "logs"))
    assert (tmp_path / "new" / "logs").is_dir()


def test_a_bad_api_url_is_reported_by_the_real_command() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent",
            "--node",
            "a",
            "--api",
            "ftp://x",
            "--token",
            "t",
            "--broker",
            "memory://",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--api must be an http:// or https:// URL" in result.stderr
    assert "Traceback" not in result.stderr


TOKEN = "-Zq3vYy0d5Xk1_8mW2pLr7a9sTb4cNe6fGh0jKu2oIx"  # token_urlsafe(32) begins so once in 64


def test_a_token_that_begins_with_a_hyphen_is_taken_by_the_real_command() -> None:
    """Before, ``--token -Zq3…`` was argparse's 'argument --token: expected one argument'."""
    command = [sys.executable, "-m", "agent", "--node", "a", "--emulate", "--broker", "memory://"]
    result = subprocess.run(
        [*command, "--token", TOKEN, "--api", "ftp://x"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "--api must be an http:// or https:// URL" in result.stderr  # past the token


@pytest.mark.parametrize(
    ("argv", "token"),
    [
        (["--token", TOKEN], TOKEN),
        ([f"--token={TOKEN}"], TOKEN),
        (["--token", "plain"], "plain"),
        (["--token", "-x", "--token", "-y"], "-y"),  # the last one wins, as argparse's own
    ],
)
def test_dashed_tokens_are_joined_to_their_option(argv: list[str], token: str) -> None:
    p = parser()
    args = p.parse_args(dashed_token_joined(["--api", "http://127.0.0.1:8000", "--node", "a", *argv]))
    assert args.token == token


def test_a_token_left_out_before_the_next_option_is_still_an_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        parser().parse_args(dashed_token_joined(["--token", "--api", "http://127.0.0.1:8000"]))
    assert info.value.code == 2
    assert "argument --token: expected one argument" in capsys.readouterr().err


def test_fleet_emulates_named_nodes_with_declared_gpus() -> None:
    built = setup("--fleet", "3x4", "--speedup", "20")
    assert [a.node for a in built.agents] == ["node-00", "node-01", "node-02"]
    beat = built.agents[2].heartbeat().payload()
    assert [g["index"] for g in beat["gpus"]] == [0, 1, 2, 3]
    assert all(g["memory_mb"] == 49_140 for g in beat["gpus"])


def test_fleet_names_widen_past_100_nodes() -> None:
    names = [a.node for a in setup("--fleet", "101x1", "--node", "gpu").agents]
    assert (names[0], names[-1], len(names)) == ("gpu-000", "gpu-100", 101)


def test_single_emulated_node_declares_gpus() -> None:
    [agent] = setup("--node", "n7", "--emulate", "--gpus", "2", "--gpu-memory-mb", "16000").agents
    assert [(g["index"], g["memory_mb"]) for g in agent.heartbeat().payload()["gpus"]] == [
        (0, 16000),
        (1, 16000),
    ]


def test_token_file_gives_each_node_its_token(tmp_path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"node-00": "t0", "node-01": "t1"}')
    p = parser()
    assert node_tokens(str(path), None, ["node-00", "node-01"], p) == {"node-00": "t0", "node-01": "t1"}
    # A node missing from the file takes --token; without --token it is an error.
    assert node_tokens(str(path), "shared", ["node-02"], p) == {"node-02": "shared"}
    with pytest.raises(SystemExit):
        node_tokens(str(path), None, ["node-00", "node-02"], p)
    assert "no token for node-02" in capsys.readouterr().err
    path.write_text('["not", "an", "object"]')
    with pytest.raises(SystemExit):
        node_tokens(str(path), None, ["node-00"], p)
    assert "must hold a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        node_tokens(str(tmp_path / "absent.json"), None, ["node-00"], p)
    assert "cannot read --token-file" in capsys.readouterr().err


def transport_of(argv: list[str], monkeypatch: pytest.MonkeyPatch, env: str | None = None):
    monkeypatch.delenv("REDIS_URL", raising=False)
    if env is None:
        monkeypatch.delenv("SHAREWISE_AGENT_TRANSPORT", raising=False)
    else:
        monkeypatch.setenv("SHAREWISE_AGENT_TRANSPORT", env)
    p = parser()
    return build(p.parse_args(["--api", "http://127.0.0.1:8000", "--token", "t", *argv]), p)


def test_without_a_broker_placements_are_pulled(monkeypatch: pytest.MonkeyPatch) -> None:
    built = transport_of(["--node", "a", "--emulate"], monkeypatch)
    assert built.transport == "pull" and built.puller is not None and built.puller.cursors == {"a": 0}


def test_with_a_broker_they_are_pushed_unless_pull_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    pushed = transport_of(["--node", "a", "--emulate", "--broker", "memory://"], monkeypatch)
    assert (pushed.transport, pushed.broker, pushed.puller) == ("push", "memory://", None)
    pulled = transport_of(["--node", "a", "--emulate", "--broker", "memory://"], monkeypatch, env="pull")
    assert pulled.transport == "pull" and pulled.puller is not None


def test_push_without_a_broker_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as info:
        transport_of(["--node", "a", "--emulate", "--transport", "push"], monkeypatch)
    assert info.value.code == 2
    assert "--transport push needs a broker" in capsys.readouterr().err


def test_the_transport_from_the_environment_is_checked_as_the_server_checks_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """argparse never checked a default against its choices: carrier-pigeon meant pull, and PUSH
    (push to the server, which folds case) meant pull too, so no placement ever arrived."""
    shouted = transport_of(["--node", "a", "--emulate", "--broker", "memory://"], monkeypatch, env="PUSH")
    assert shouted.transport == "push"
    with pytest.raises(SystemExit) as info:
        transport_of(["--node", "a", "--emulate"], monkeypatch, env="carrier-pigeon")
    assert info.value.code == 2
    assert "$SHAREWISE_AGENT_TRANSPORT must be pull or push, got 'carrier-pigeon'" in capsys.readouterr().err


class _Answering(BaseHTTPRequestHandler):
    """Answers every request with :attr:`status` and a JSON error."""

    status = 401
    body = b""  # the answer's body, when not the status's default

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        default = b'{"error": "Invalid node token."}' if self.status == 401 else b'{"error": "busy"}'
        body = self.body or default
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer  # noqa: N815 - http.server's naming

    def log_message(self, *args: Any) -> None:
        pass


def agent_against(
    status: int, *extra: str, body: bytes = b""
) -> tuple[subprocess.Popen[str], ThreadingHTTPServer]:
    """The real command, one declared GPU, reporting to (and by default pulling from) a local
    server that answers ``status`` (and ``body``, if given) to everything."""
    handler = type("Handler", (_Answering,), {"status": status, "body": body})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SHAREWISE_AGENT_TRANSPORT")}
    command = [sys.executable, "-m", "agent", "--node", "node-00", "--gpus", "1", "--heartbeat-s", "0.2"]
    command += ["--api", f"http://127.0.0.1:{httpd.server_port}", "--token", "revoked", "--poll-wait-s", "0"]
    command += extra
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return process, httpd


@pytest.mark.parametrize("transport", [(), ("--transport", "push", "--broker", "memory://")])
def test_a_refused_token_stops_the_agent_with_one_line_and_status_3(transport: tuple[str, ...]) -> None:
    """Before, the agent logged each 401 and went on heartbeating and polling forever (pull),
    or heartbeating beside its Celery worker (push)."""
    process, httpd = agent_against(401, *transport)
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == EXIT_TOKEN_REFUSED == 3
    last = err.strip().splitlines()[-1]
    assert last.startswith("sharewise-agent: error: the server refused the node token of node-00 (HTTP 401 ")
    assert '{"error": "Invalid node token."}' in last and "wrong or was revoked" in last
    assert "Traceback" not in err


@pytest.mark.parametrize("transport", [(), ("--transport", "push", "--broker", "memory://")])
def test_another_nodes_token_stops_the_agent_with_one_line_and_status_3(transport: tuple[str, ...]) -> None:
    """node-07's valid token given to node-00's agent: before, each heartbeat's and report's 403
    was logged and sent again every few seconds forever (pull and push alike)."""
    mismatch = {
        "error": "this token belongs to node node-07, not node-00",
        "code": "token_node_mismatch",
        "token_node": "node-07",
        "node": "node-00",
    }
    process, httpd = agent_against(403, *transport, body=json.dumps(mismatch).encode())
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == EXIT_TOKEN_REFUSED == 3
    assert err.strip().splitlines()[-1] == (
        "sharewise-agent: error: the node token belongs to node node-07, not node-00: start this "
        "agent with node-00's token (--token, $SHAREWISE_NODE_TOKEN or --token-file)"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize("transport", [(), ("--transport", "push", "--broker", "memory://")])
def test_credentials_the_server_did_not_see_as_a_node_token_stop_the_agent_with_status_3(
    transport: tuple[str, ...],
) -> None:
    """A proxy that replaces the agent's ``Authorization: Node ...`` header: the server's 403
    coded ``node_token_required`` answers every report alike, so the agent stops (exit 3) and
    says what to look at, rather than dropping each report and heartbeating on."""
    refused = {
        "error": "this endpoint takes a node agent's token, sent as 'Authorization: Node <token>' "
        "(printed when the node was registered), not 'Basic' credentials",
        "code": "node_token_required",
    }
    process, httpd = agent_against(403, *transport, body=json.dumps(refused).encode())
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == EXIT_TOKEN_REFUSED == 3
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "sharewise-agent: error: the server did not receive the node token of node-00 (HTTP 403 "
    )
    assert refused["error"] in last
    assert last.endswith(
        "something between the agent and the server (a proxy) replaces the agent's "
        "'Authorization: Node <token>' header; let it through unchanged"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize("transport", [(), ("--transport", "push", "--broker", "memory://")])
def test_an_api_url_that_answers_404_to_the_heartbeat_stops_the_agent_with_status_2(
    transport: tuple[str, ...],
) -> None:
    """``--api http://HOST:8000/dashboard/``: every call is a 404; before, the agent retried for
    ever, its log naming only /api/v1/agent/heartbeat/."""
    process, httpd = agent_against(404, *transport, body=b'{"error": "not found"}')
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == EXIT_WRONG_API == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "sharewise-agent: error: the API URL looks wrong: "
        f"--api http://127.0.0.1:{httpd.server_port} answers 404"
    )
    assert 'HTTP 404 from /api/v1/agent/heartbeat/: {"error": "not found"}' in last
    assert last.endswith("give the server's base URL, without a path (e.g. http://HOST:8000)")
    assert "Traceback" not in err


def test_a_403_without_the_code_is_not_an_exit() -> None:
    """A 403 for one job (never placed on this node) carries no code: the agent runs on."""
    process, httpd = agent_against(403, body=b'{"error": "job 7 was never placed on node node-00"}')
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.communicate(timeout=3)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == 0


def test_a_server_error_is_retried_not_an_exit() -> None:
    process, httpd = agent_against(503)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.communicate(timeout=3)  # still retrying after many heartbeats and polls
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        httpd.shutdown()
    assert process.returncode == 0 and "server unreachable" in err
