"""Jobs' output on the node (agent/joblogs.py): captured per run, bounded, rotated on disk, shipped
in ordered chunks; the executor each heartbeat declares."""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

from agent.core import Agent
from agent.executors import (
    MAX_OUTPUT_LINES,
    EmulatedExecutor,
    OutputLines,
    SubprocessExecutor,
    executor_kind,
)
from agent.gpus import declared_gpus
from agent.joblogs import MAX_CHUNK_CHARS, MAX_LINE_CHARS, JobLog, LogBook, LogShipper, RotatingFile
from agent.messages import PlacementMessage
from agent.reporter import Reporter
from agent.runner import Runner

from .conftest import NODE, FakeClock, FakeTransport, placement


def log_posts(transport: FakeTransport) -> list[dict]:
    return [p for path, p in transport.sent if path.endswith("/logs/")]


def test_chunks_carry_offsets_of_the_runs_output() -> None:
    log = JobLog(7, "node-00/g1", max_buffer_chars=1000)
    log.write("first")
    log.write("second")
    chunk = log.next_chunk()
    assert chunk is not None and (chunk.offset, chunk.data, chunk.eof) == (0, "first\nsecond\n", False)
    assert chunk.path == "/api/v1/agent/jobs/7/logs/"
    log.write("third")
    log.delivered(chunk)  # the server has the first 13 characters; "third\n" is still to send
    follow = log.next_chunk()
    assert follow is not None and (follow.offset, follow.data) == (13, "third\n")
    log.close()
    last = log.next_chunk()
    assert (
        last is not None
        and last.eof
        and last.payload()
        == {
            "run": "node-00/g1",
            "offset": 13,
            "data": "third\n",
            "eof": True,
        }
    )
    log.delivered(last)
    assert log.done and log.next_chunk() is None


def test_chunks_end_after_a_line_and_respect_the_size_bound() -> None:
    log = JobLog(1, "r", max_buffer_chars=100_000)
    line = "x" * 999  # 1,000 characters with its newline
    for _ in range(MAX_CHUNK_CHARS // 1000 + 2):
        log.write(line)
    chunk = log.next_chunk()
    assert chunk is not None and len(chunk.data) == MAX_CHUNK_CHARS and chunk.data.endswith("\n")
    log.write("\x00 nul" + "y" * (MAX_LINE_CHARS + 10))
    log.delivered(chunk)
    rest = ""
    while (piece := log.next_chunk()) is not None and piece.data:
        rest += piece.data
        log.delivered(piece)
    assert f"\ufffd nul{'y' * (MAX_LINE_CHARS - 5)} [line cut at {MAX_LINE_CHARS} characters]\n" in rest


def test_unsent_output_is_bounded_and_the_gap_is_visible_in_offsets() -> None:
    log = JobLog(1, "r", max_buffer_chars=10)
    for word in ("aaaa", "bbbb", "cccc"):  # 15 characters, 10 kept
        log.write(word)
    chunk = log.next_chunk()
    assert chunk is not None and (chunk.offset, chunk.data) == (5, "bbbb\ncccc\n")


def test_local_files_rotate(tmp_path: Path) -> None:
    file = RotatingFile(tmp_path / "job-1.log", max_bytes=10, backups=2)
    for line in ("aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n"):
        file.write(line)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["job-1.log", "job-1.log.1", "job-1.log.2"]  # the oldest beyond 2 backups is gone
    assert (tmp_path / "job-1.log").read_text() == "gggg\n"
    assert (tmp_path / "job-1.log.1").read_text() == "eeee\nffff\n"
    assert (tmp_path / "job-1.log.2").read_text() == "cccc\ndddd\n"


def test_the_shipper_retries_after_an_outage_and_drops_a_refused_log() -> None:
    transport = FakeTransport()
    book = LogBook()
    log = book.open(1, "r")
    log.write("hello")
    shipper = LogShipper(transport, backoff_s=1.0)
    transport.down = True
    assert shipper.ship([book], now=0.0) == 0
    transport.down = False
    assert shipper.ship([book], now=0.5) == 0  # still backing off
    assert shipper.ship([book], now=1.0) == 1
    assert log_posts(transport) == [{"run": "r", "offset": 0, "data": "hello\n", "eof": False}]

    class Refusing(FakeTransport):
        def post(self, path: str, payload: dict) -> None:
            from agent.reporter import TransportError

            raise TransportError("HTTP 404: job 2 does not exist", retryable=False, status=404)

    other = book.open(2, "r2")
    other.write("gone")
    LogShipper(Refusing()).ship([book], now=2.0)
    assert other not in book.pending()


def test_an_emulated_job_logs_its_progress_and_the_runner_ships_it(agent: Agent, clock: FakeClock) -> None:
    transport = FakeTransport()
    runner = Runner([agent], [Reporter(transport)], clock, heartbeat_every_s=100.0)
    agent.apply(placement(generation=2), now=0.0)  # 100 iterations of 0.5 s at speedup 10: 5 s
    for now in (0.0, 1.0, 2.0, 6.0):
        clock.now = now
        runner.tick()
    text = "".join(p["data"] for p in log_posts(transport))
    lines = text.splitlines()
    assert lines[0] == "emulated resnet18: 100 iterations from 0"
    # 1 s of wall time = 20 iterations, each measured 0.5 s of job time
    assert lines[1:] == [
        "SHAREWISE_PROGRESS iterations_done=20 iter_time_s=0.5",
        "SHAREWISE_PROGRESS iterations_done=40 iter_time_s=0.5",
        "SHAREWISE_PROGRESS iterations_done=100 iter_time_s=0.5",
    ]
    assert {p["run"] for p in log_posts(transport)} == {"node-00/g2"}
    assert log_posts(transport)[-1]["eof"] is True
    # the job's last output reached the server before its "finished"
    order = [path if path.endswith("/logs/") else p.get("event") for path, p in transport.sent]
    last_log = max(i for i, what in enumerate(order) if what == "/api/v1/agent/jobs/1/logs/")
    assert last_log < order.index("finished")


def test_a_real_jobs_stdout_and_stderr_are_captured(tmp_path: Path) -> None:
    script = "import sys\nprint('to stdout', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)"
    book = LogBook(tmp_path)
    agent = Agent(NODE, declared_gpus(NODE, 4, 16_000), SubprocessExecutor, time.monotonic, 0.0, logs=book)
    agent.apply(placement(command=[sys.executable, "-c", script]))
    deadline = time.monotonic() + 10
    while agent.busy and time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)
    [log] = book.pending()
    chunk = log.next_chunk()
    assert chunk is not None and chunk.eof
    assert sorted(chunk.data.splitlines()) == ["to stderr", "to stdout"]
    assert sorted((tmp_path / "job-1.log").read_text().splitlines()) == ["to stderr", "to stdout"]


def test_a_job_that_cannot_start_says_why_in_its_log() -> None:
    agent = Agent(NODE, declared_gpus(NODE, 4, 16_000), SubprocessExecutor)
    agent.apply(placement(command=None))
    agent.step()
    [log] = agent.logs.pending()
    chunk = log.next_chunk()
    assert chunk is not None and chunk.eof
    assert chunk.data.startswith(
        "[sharewise-agent] the job could not start on node-00: the placement has no command"
    )


def test_heartbeats_declare_the_executor(agent: Agent) -> None:
    assert agent.heartbeat().payload()["executor"] == "emulated"
    real = Agent(NODE, declared_gpus(NODE, 1, 16_000), partial(SubprocessExecutor, stop_grace_s=1.0))
    assert real.heartbeat().payload()["executor"] == "subprocess"
    assert executor_kind(partial(EmulatedExecutor, speedup=2.0)) == "emulated"
    other = Agent(NODE, declared_gpus(NODE, 1, 16_000), lambda m, now: EmulatedExecutor(m, now))
    assert "executor" not in other.heartbeat().payload()  # unknown: not declared


def gap(dropped: int) -> str:
    return (
        f"[sharewise agent: {dropped} lines dropped here, past the {MAX_OUTPUT_LINES} the agent keeps"
        " until it collects them (e.g. while the service was unreachable)]"
    )


def held_up(message: PlacementMessage, now: float) -> SubprocessExecutor:
    """A real job the agent first collects from once it has printed everything and exited, as when
    the agent's loop is held up by requests to an unreachable service."""
    executor = SubprocessExecutor(message, now)
    executor.wait(30.0)
    return executor


def sent_log(printed: int) -> list[str]:
    """The lines the server receives of a job that prints ``line 0`` … ``line {printed - 1}`` while
    the agent is held up; the transport is down at first, then back."""
    transport = FakeTransport()
    transport.down = True
    agent = Agent(NODE, declared_gpus(NODE, 1, 16_000), held_up, time.monotonic, 0.0)
    runner = Runner([agent], [Reporter(transport)], heartbeat_every_s=100.0)
    script = f"for i in range({printed}):\n    print(f'line {{i}}')"
    agent.apply(placement(command=[sys.executable, "-c", script]))
    runner.tick(now=0.0)
    transport.down = False
    for now in range(1, 400, 2):  # past the shipper's backoff of 1 s, 2 s, ...; 4,000 characters a chunk
        if log_posts(transport) and log_posts(transport)[-1]["eof"]:
            break
        runner.tick(now=float(now))
    assert log_posts(transport)[-1]["eof"] is True
    return "".join(p["data"] for p in log_posts(transport)).splitlines()


def test_lines_dropped_past_the_bound_leave_one_marker_with_their_count_where_they_were() -> None:
    """Before, the oldest lines past MAX_OUTPUT_LINES went without a trace: the log read as if the
    job had started printing at ``line 1234``."""
    printed = MAX_OUTPUT_LINES + 1234
    assert sent_log(printed) == [gap(1234)] + [f"line {i}" for i in range(1234, printed)]


def test_nothing_is_dropped_or_marked_up_to_the_bound() -> None:
    assert sent_log(MAX_OUTPUT_LINES) == [f"line {i}" for i in range(MAX_OUTPUT_LINES)]


def test_each_collection_marks_only_its_own_gap() -> None:
    lines = OutputLines(["a"], max_lines=3)
    for line in ("b", "c", "d", "e"):
        lines.append(line)
    assert lines.take() == [gap(2).replace(str(MAX_OUTPUT_LINES), "3"), "c", "d", "e"]
    lines.append("f")
    assert lines.take() == ["f"]  # the count starts again after a collection
    assert lines.take() == []
