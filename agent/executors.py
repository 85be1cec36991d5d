"""Executors: what actually runs a job placed on this node.

- :class:`EmulatedExecutor` advances progress from the profile: one iteration takes
  ``iter_time_s · ξ`` seconds of job time (ξ = slowdown of the current co-location, MODEL.md §2),
  and ``--speedup X`` compresses job time into wall time by ``X``.
  An optional :class:`EmulatedTruth` gives the job a true speed other than the server's
  prediction (the demo's emulated cluster whose speeds differ from the shipped profile).
- :class:`SubprocessExecutor` runs the job's command with ``CUDA_VISIBLE_DEVICES`` and the
  ``SHAREWISE_*`` variables, reads the progress lines the job prints
  (``SHAREWISE_PROGRESS iterations_done=N iter_time_s=X memory_mb=M``, docs/AGENT.md §4), stops
  the job on cancel, and classifies a failure as out of GPU memory from its last output lines
  (:func:`failure_kind`).

An executor is created for one run of one job (``factory(message, now)``) and polled by the
agent with :meth:`Executor.poll`; it never sleeps and takes the time from its caller, so tests
drive it with a fake clock. Both also have ``take_output()``: the job's output lines since the last
call, which the agent keeps and ships (``agent.joblogs``); an emulated job's output is the progress
line a real job would print, at most once per ``line_every_s``.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import re
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from agent.messages import PlacementMessage

log = logging.getLogger(__name__)

State = Literal["running", "finished", "failed", "stopped"]

PROGRESS_PREFIX = "SHAREWISE_PROGRESS"
_PAIR = re.compile(r"(\w+)=(\S+)")
#: Output lines kept per job: the last is the ``failed`` reason, all are searched for an
#: out-of-memory message (a traceback's last lines name the error).
TAIL_LINES = 20
#: What CUDA, cuBLAS and PyTorch print when the GPU's memory is exhausted (lower case): PyTorch's
#: ``torch.OutOfMemoryError`` / ``torch.cuda.OutOfMemoryError`` ("CUDA out of memory. Tried to
#: allocate …"), the CUDA runtime's "out of memory", cuBLAS's ``CUBLAS_STATUS_ALLOC_FAILED``.
OOM_MARKERS = ("outofmemoryerror", "out of memory", "cublas_status_alloc_failed")
#: Output lines an executor keeps between two ``take_output()`` calls (the oldest are dropped, and
#: :class:`OutputLines` puts one :func:`gap_line` in their place).
MAX_OUTPUT_LINES = 10_000


def progress_line(iterations_done: float, iter_time_s: float | None) -> str:
    """The progress line of docs/AGENT.md §4: ``SHAREWISE_PROGRESS iterations_done=N iter_time_s=X``."""
    line = f"{PROGRESS_PREFIX} iterations_done={int(iterations_done)}"
    return line if iter_time_s is None else f"{line} iter_time_s={iter_time_s:.6g}"


def gap_line(dropped: int, max_lines: int = MAX_OUTPUT_LINES) -> str:
    """The line that stands where ``dropped`` (> 0) lines of a job's output were dropped, past the
    bound of ``max_lines`` lines not yet collected."""
    return (
        f"[sharewise agent: {dropped} lines dropped here, past the {max_lines} the agent keeps"
        " until it collects them (e.g. while the service was unreachable)]"
    )


class OutputLines:
    """A job's output lines until the agent collects them, at most ``max_lines`` (≥ 1).

    A job that prints faster than the agent collects (its loop held up, typically by requests to
    an unreachable service, each waiting for its timeout) would otherwise fill memory. Past the
    bound the oldest lines go, and :meth:`take` returns one :func:`gap_line` with their count
    before the kept ones: the dropped lines are the oldest since the last take, so that is where
    they are missing in the job's log. Raises ``ValueError`` for ``max_lines`` < 1.
    """

    def __init__(self, lines: Iterable[str] = (), max_lines: int = MAX_OUTPUT_LINES) -> None:
        if max_lines < 1:
            raise ValueError(f"max_lines must be >= 1, got {max_lines}")
        self.max_lines = max_lines
        self._lines: deque[str] = deque(maxlen=max_lines)
        self.dropped = 0  # lines dropped since the last take
        for line in lines:
            self.append(line)

    def append(self, line: str) -> None:
        """Keep ``line`` (dropping the oldest kept line at the bound)."""
        if len(self._lines) == self.max_lines:
            self.dropped += 1
        self._lines.append(line)

    def take(self) -> list[str]:
        """The lines since the last call, oldest first, a gap line first when some were dropped."""
        lines = list(self._lines)
        if self.dropped:
            lines.insert(0, gap_line(self.dropped, self.max_lines))
        self._lines.clear()
        self.dropped = 0
        return lines


class ExecutorError(RuntimeError):
    """The job could not be started; ``str()`` is the reason reported in the ``failed`` event."""


@dataclass(frozen=True, slots=True)
class Status:
    """A job's state as its executor sees it.

    ``iterations_done``: completed iterations (may be fractional for an emulated job);
    ``iter_time_s``: the latest measured time of one iteration (s of job time, ``None`` before
    the first measurement); ``reason``: why the job failed; ``memory_mb``: the latest peak GPU
    memory per GPU the job reported (MB, ``None``: never); ``failure_kind``: ``"oom"`` when a
    failed job ran out of GPU memory, else ``""``.
    """

    state: State
    iterations_done: float
    iter_time_s: float | None = None
    reason: str = ""
    memory_mb: float | None = None
    failure_kind: str = ""


class Executor(Protocol):
    """One run of one job."""

    def poll(self, now: float) -> Status:
        """The job's state at wall time ``now`` (s, the agent's clock)."""
        ...

    def update(self, slowdown: float, now: float, message: PlacementMessage | None = None) -> None:
        """The co-location changed at ``now``: the job runs at slowdown ξ = ``slowdown`` from now on
        (``message``: the placement that says so)."""
        ...

    def stop(self, now: float) -> None:
        """Ask the job to stop (cancel or preemption); :meth:`poll` says ``stopped`` once it has."""
        ...


ExecutorFactory = Callable[[PlacementMessage, float], Executor]


class EmulatedTruth(Protocol):
    """How fast an emulated job really runs, when that is not what the server predicts."""

    def iter_time_s(self, message: PlacementMessage) -> float:
        """True exclusive time of one iteration of the job at ``message.sub_batch`` (s, > 0)."""
        ...

    def slowdown(self, message: PlacementMessage) -> float:
        """True ξ (≥ 1) of the job beside ``message.partners`` (1 without partners)."""
        ...


class EmulatedExecutor:
    """A job that makes progress from its profile, without running anything.

    Wall time of one iteration = ``iter_time_s · ξ / speedup`` (s), with ``iter_time_s`` and ξ the
    message's — or, given a ``truth``, :meth:`EmulatedTruth.iter_time_s` and
    :meth:`EmulatedTruth.slowdown` of the message. ξ may change at any time (:meth:`update`);
    progress is integrated piecewise, so a job that ran 2 s alone and then shares keeps the
    iterations it did alone. Raises ``ValueError`` for ``speedup`` ≤ 0.
    """

    def __init__(
        self,
        message: PlacementMessage,
        now: float,
        speedup: float = 1.0,
        truth: EmulatedTruth | None = None,
        line_every_s: float = 1.0,
    ) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        self._truth = truth
        self._iterations = float(message.iterations)
        self._iter_time_s = message.iter_time_s if truth is None else truth.iter_time_s(message)
        self._speedup = speedup
        self._slowdown = message.slowdown if truth is None else truth.slowdown(message)
        self._done_at_anchor = float(message.iterations_done)
        self._anchor = now
        self._stopped = False
        self._line_every_s = line_every_s
        self._line_at = now
        self._lined = int(message.iterations_done)
        self._output = OutputLines(
            [f"emulated {message.model or 'job'}: {message.iterations} iterations from {self._lined}"]
        )

    def _wall_per_iteration_s(self) -> float:
        return self._iter_time_s * self._slowdown / self._speedup

    def _done(self, now: float) -> float:
        if self._stopped:
            return self._done_at_anchor
        ran = max(0.0, now - self._anchor) / self._wall_per_iteration_s()
        return min(self._iterations, self._done_at_anchor + ran)

    def _reanchor(self, now: float) -> None:
        self._done_at_anchor = self._done(now)
        self._anchor = now

    def finish_time(self) -> float:
        """Wall time (agent clock, s) at which the job finishes if ξ stays as it is now."""
        return self._anchor + (self._iterations - self._done_at_anchor) * self._wall_per_iteration_s()

    def poll(self, now: float) -> Status:
        """Progress at ``now``; ``iter_time_s`` is ``iter_time_s · ξ`` (job time, not wall time)."""
        done = self._done(now)
        measured = self._iter_time_s * self._slowdown
        if int(done) > self._lined and (
            now - self._line_at >= self._line_every_s or done >= self._iterations
        ):
            self._output.append(progress_line(done, measured))
            self._lined, self._line_at = int(done), now
        if self._stopped:
            return Status("stopped", done, measured)
        return Status("finished" if done >= self._iterations else "running", done, measured)

    def take_output(self) -> list[str]:
        """The progress lines made since the last call (one per ``line_every_s`` at most)."""
        return self._output.take()

    def update(self, slowdown: float, now: float, message: PlacementMessage | None = None) -> None:
        """Keep the progress made so far at the old ξ, continue at ``slowdown`` (with a ``truth``,
        at its ξ for ``message``)."""
        self._reanchor(now)
        self._slowdown = slowdown if self._truth is None or message is None else self._truth.slowdown(message)

    def stop(self, now: float) -> None:
        """Freeze progress at ``now``."""
        self._reanchor(now)
        self._stopped = True


class Progress(NamedTuple):
    """One progress line: ``iterations_done`` (iterations), ``iter_time_s`` (s), ``memory_mb``
    (peak GPU memory per GPU, MB); the last two ``None`` when the line omits them."""

    iterations_done: float
    iter_time_s: float | None = None
    memory_mb: float | None = None


def parse_progress(line: str) -> Progress | None:
    """The :class:`Progress` of a ``SHAREWISE_PROGRESS`` line, else ``None`` (docs/AGENT.md §4).

    Format: ``SHAREWISE_PROGRESS iterations_done=N iter_time_s=X memory_mb=M`` (keys in any
    order, ``iter_time_s`` and ``memory_mb`` optional, other keys ignored). A line with a missing,
    negative or non-numeric ``iterations_done`` is not a progress line; a non-positive or
    non-numeric ``iter_time_s`` or ``memory_mb`` makes the whole line invalid too.
    """
    if not line.startswith(PROGRESS_PREFIX):
        return None
    fields = dict(_PAIR.findall(line[len(PROGRESS_PREFIX) :]))
    try:
        done = float(fields["iterations_done"])
        iter_time = float(fields["iter_time_s"]) if "iter_time_s" in fields else None
        memory = float(fields["memory_mb"]) if "memory_mb" in fields else None
    except (KeyError, ValueError):
        return None
    if not done >= 0 or any(v is not None and not (v > 0 and math.isfinite(v)) for v in (iter_time, memory)):
        return None
    return Progress(done, iter_time, memory)


def failure_kind(lines: Iterable[str]) -> str:
    """``"oom"`` when any of a failed job's last output ``lines`` says the GPU ran out of memory
    (:data:`OOM_MARKERS`, case-insensitive), else ``""``."""
    return "oom" if any(marker in line.lower() for line in lines for marker in OOM_MARKERS) else ""


def job_environment(message: PlacementMessage, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a job's process: ``base`` (default: the agent's) plus Sharewise's variables.

    ``CUDA_VISIBLE_DEVICES`` lists the placement's GPU indices in PCI bus order (NVML's order,
    hence ``CUDA_DEVICE_ORDER=PCI_BUS_ID``); ``SHAREWISE_SUB_BATCH`` × ``SHAREWISE_ACCUM_STEPS``
    = ``SHAREWISE_BATCH_SIZE``; ``SHAREWISE_ITERATIONS`` is the total and
    ``SHAREWISE_ITERATIONS_DONE`` where a restarted job resumes.
    """
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in message.gpu_indices),
            "SHAREWISE_JOB_ID": str(message.job_id),
            "SHAREWISE_SUB_BATCH": str(message.sub_batch),
            "SHAREWISE_ACCUM_STEPS": str(message.accum_steps),
            "SHAREWISE_BATCH_SIZE": str(message.batch_size),
            "SHAREWISE_ITERATIONS": str(message.iterations),
            "SHAREWISE_ITERATIONS_DONE": str(int(message.iterations_done)),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


class SubprocessExecutor:
    """Runs ``message.command`` as a child process in its own session (process group).

    Output (stdout and stderr together) is read by a daemon thread: progress lines update the
    status, other lines go to the agent's log at DEBUG and the last few are kept for the
    ``failed`` reason. Exit 0 → ``finished``; another exit → ``failed``; after :meth:`stop`,
    SIGTERM to the process group, then SIGKILL after ``stop_grace_s`` seconds → ``stopped``.
    Raises :class:`ExecutorError` when there is no command or it cannot be started.
    """

    def __init__(self, message: PlacementMessage, now: float, stop_grace_s: float = 10.0) -> None:
        if not message.command:
            raise ExecutorError("the placement has no command to run (the subprocess executor needs one)")
        self._job_id = message.job_id
        self._stop_grace_s = stop_grace_s
        self._done = float(message.iterations_done)
        self._iter_time_s: float | None = None
        self._memory_mb: float | None = None
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._output = OutputLines()  # every line, for the job's log
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._eof = False
        self._exit_seen_at: float | None = None
        self._kill_at: float | None = None
        self._stopping = False
        try:
            self._process = subprocess.Popen(
                list(message.command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=job_environment(message),
                start_new_session=True,  # its own process group: stop() reaches the job's children too
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise ExecutorError(f"cannot start {message.command[0]!r}: {exc}") from None
        self._reader = threading.Thread(target=self._read, name=f"job-{message.job_id}-output", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The child's process id (also its process group id)."""
        return self._process.pid

    def _read(self) -> None:
        assert self._process.stdout is not None
        with self._process.stdout as stream:
            for line in stream:
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _drain(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            if line is None:
                self._eof = True
                continue
            self._output.append(line)
            progress = parse_progress(line)
            if progress is None:
                log.debug("job %d: %s", self._job_id, line)
                if line.strip():
                    self._tail.append(line.strip())
                continue
            self._done = max(self._done, progress.iterations_done)
            if progress.iter_time_s is not None:
                self._iter_time_s = progress.iter_time_s
            if progress.memory_mb is not None:
                self._memory_mb = progress.memory_mb

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self._process.pid, signum)
        except ProcessLookupError:  # already gone
            pass

    def poll(self, now: float) -> Status:
        """Read new output, escalate a pending stop to SIGKILL when its grace is over."""
        self._drain()
        code = self._process.poll()
        if code is None:
            if self._kill_at is not None and now >= self._kill_at:
                log.warning("job %d ignored SIGTERM for %.0f s; killing it", self._job_id, self._stop_grace_s)
                self._signal(signal.SIGKILL)
                self._kill_at = None
            return self._status("running")
        if self._exit_seen_at is None:
            self._exit_seen_at = now
        # The output may still hold the last progress lines: wait for its end (bounded, a child
        # that left a grandchild holding the pipe must not keep the job "running" forever).
        if not self._eof and now - self._exit_seen_at < 2.0:
            return self._status("running")
        if self._stopping:
            return self._status("stopped")
        if code == 0:
            return self._status("finished")
        reason = f"exit code {code}" if code > 0 else f"killed by signal {-code}"
        if self._tail:
            reason += f": {self._tail[-1]}"
        return self._status("failed", reason[:500], failure_kind(self._tail))

    def take_output(self) -> list[str]:
        """The job's output lines (stdout and stderr) read since the last call; past
        :data:`MAX_OUTPUT_LINES` the oldest are replaced by one :func:`gap_line` (:class:`OutputLines`)."""
        self._drain()
        return self._output.take()

    def _status(self, state: State, reason: str = "", kind: str = "") -> Status:
        return Status(state, self._done, self._iter_time_s, reason, self._memory_mb, kind)

    def update(self, slowdown: float, now: float, message: PlacementMessage | None = None) -> None:
        """Nothing to do: a real job's speed changes by itself when its partner starts or ends."""

    def stop(self, now: float) -> None:
        """SIGTERM the job's process group now, SIGKILL it ``stop_grace_s`` later (in :meth:`poll`)."""
        if self._stopping:
            return
        self._stopping = True
        if self._process.poll() is None:
            self._signal(signal.SIGTERM)
            self._kill_at = now + self._stop_grace_s

    def wait(self, timeout_s: float) -> None:
        """Block until the process has exited (shutdown and tests); raises ``subprocess.TimeoutExpired``."""
        self._process.wait(timeout_s)
        self._reader.join(timeout_s)


def executor_kind(factory: ExecutorFactory) -> str:
    """What heartbeats declare for ``factory``: ``emulated`` or ``subprocess`` for the two executors
    here (or a ``functools.partial`` of one), ``""`` (not declared) for anything else."""
    target = getattr(factory, "func", factory)
    if target is EmulatedExecutor:
        return "emulated"
    if target is SubprocessExecutor:
        return "subprocess"
    return ""
