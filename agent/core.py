"""The agent's state machine: placements in, job events and heartbeats out.

:class:`Agent` is pure bookkeeping around executors. It takes the time from an injectable clock
(or from the caller), never sleeps and never talks to the network: :meth:`Agent.apply` is what
the Celery task calls, :meth:`Agent.step` advances the jobs and returns the events to report,
:meth:`Agent.heartbeat` builds the heartbeat. The runner (``agent.runner``) and the tests drive
it; the server's embedded mode may drive it in-process.

Idempotency (ARCHITECTURE.md, data flow step 7; TESTING.md invariant 9): a message is applied
only if its generation is higher than every generation seen for its job, so a placement
delivered twice, or overtaken by a newer one, is applied once. Placements are full
descriptions of the desired state, so an ``update`` that overtakes its ``start`` starts the
job with the newest settings, and a ``start`` that arrives after its ``stop`` is ignored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.executors import Executor, ExecutorError, ExecutorFactory, Status, executor_kind
from agent.gpus import GpuInfo
from agent.joblogs import JobLog, LogBook
from agent.messages import EventKind, Heartbeat, JobEventReport, MessageError, PlacementMessage

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(slots=True)
class _Run:
    """A job running (or being stopped) on this node; ``message`` is the latest applied one."""

    message: PlacementMessage
    executor: Executor
    last_progress_at: float
    last_reported: int
    log: JobLog
    stop_reason: str = "stopped by the server"

    def collect_output(self) -> None:
        """Move the lines the executor printed since the last call into the run's log."""
        take = getattr(self.executor, "take_output", None)
        if take is not None:
            for line in take():
                self.log.write(line)

    def end_output(self) -> None:
        """The run is over: its last lines, then the end of its log."""
        self.collect_output()
        self.log.close()


class Agent:
    """The node agent of node ``node`` with GPUs ``gpus``.

    ``executor_factory(message, now)`` starts one run of a job (raising
    :class:`~agent.executors.ExecutorError` when it cannot); ``clock`` gives wall time in s
    (``time.monotonic`` by default); a running job reports ``progress`` at most every
    ``progress_every_s`` seconds of wall time, and only when it has completed a new iteration.
    ``executor``: what heartbeats declare (``emulated`` or ``subprocess``; default: inferred from
    the factory, :func:`~agent.executors.executor_kind`); ``logs``: where the runs' output goes
    (:class:`~agent.joblogs.LogBook`; default in memory only, until shipped).
    Safe to call from the Celery consumer's thread and the runner's thread at once.
    """

    def __init__(
        self,
        node: str,
        gpus: Iterable[GpuInfo],
        executor_factory: ExecutorFactory,
        clock: Clock = time.monotonic,
        progress_every_s: float = 5.0,
        executor: str | None = None,
        logs: LogBook | None = None,
    ) -> None:
        self.node = node
        self.executor = executor if executor is not None else executor_kind(executor_factory)
        self.logs = logs or LogBook()
        self._gpus = tuple(gpus)
        self._factory = executor_factory
        self._clock = clock
        self._progress_every_s = progress_every_s
        self._lock = threading.Lock()
        self._generations: dict[int, int] = {}  # job → highest generation seen (any action)
        self._ended: dict[int, str] = {}  # job → how its last run here ended
        self._runs: dict[int, _Run] = {}
        self._stopping: dict[int, _Run] = {}
        self._retiring: list[
            Executor
        ] = []  # runs replaced by a new placement, until they exit (output dropped)
        self._events: list[JobEventReport] = []  # made by apply(), handed out by the next step()

    # -- placements ---------------------------------------------------------------------------

    def apply(self, message: PlacementMessage | dict[str, Any], now: float | None = None) -> bool:
        """Apply one placement message (the Celery task's kwargs, or a parsed message).

        Returns ``True`` when it changed the node's state, ``False`` when it was ignored: for
        another node, stale or duplicate (generation not above the highest seen for the job),
        an ``update`` of a job that already ended here, or malformed. A malformed message whose
        job and generation are readable and new is reported as a ``failed`` event (and stops
        the job if it runs), so nothing is silently lost.
        """
        now = self._clock() if now is None else now
        with self._lock:
            if isinstance(message, PlacementMessage):
                return self._apply(message, now)
            try:
                parsed = PlacementMessage.from_kwargs(message)
            except MessageError as exc:
                self._reject(message, str(exc), now)
                return False
            return self._apply(parsed, now)

    def _is_new(self, job_id: int, generation: int) -> bool:
        seen = self._generations.get(job_id)
        if seen is not None and generation <= seen:
            kind = "duplicate" if generation == seen else f"stale (generation {seen} already applied)"
            log.info("%s: job %d generation %d is %s; ignored", self.node, job_id, generation, kind)
            return False
        self._generations[job_id] = generation
        return True

    def _reject(self, kwargs: Any, reason: str, now: float) -> None:
        log.error("%s: malformed placement %r: %s", self.node, kwargs, reason)
        if not isinstance(kwargs, dict) or kwargs.get("node") != self.node:
            return
        job_id, generation = kwargs.get("job_id"), kwargs.get("generation")
        if not isinstance(job_id, int) or not isinstance(generation, int):
            return
        if isinstance(job_id, bool) or isinstance(generation, bool) or job_id < 0 or generation < 0:
            return
        if not self._is_new(job_id, generation):
            return
        run = self._runs.pop(job_id, None)
        done = 0.0
        if run is not None:
            run.executor.stop(now)
            done = run.executor.poll(now).iterations_done
            run.log.write(f"[sharewise-agent] stopped: bad placement: {reason}")
            run.end_output()
            self._retiring.append(run.executor)
        self._ended[job_id] = "failed"
        self._events.append(
            JobEventReport(
                self.node, job_id, generation, "failed", int(done), None, f"bad placement: {reason}"
            )
        )

    def _apply(self, message: PlacementMessage, now: float) -> bool:
        if message.node != self.node:
            log.warning("%s: placement for node %r ignored", self.node, message.node)
            return False
        if not self._is_new(message.job_id, message.generation):
            return False
        run = self._runs.get(message.job_id)
        if message.action == "stop":
            if run is not None:
                del self._runs[message.job_id]
                run.message = message
                run.executor.stop(now)
                self._retire_stopping(message.job_id)
                self._stopping[message.job_id] = run
                self._ended[message.job_id] = "stopped"  # a later update must not restart it
            return True
        if run is not None and run.message.same_run(message):
            run.message = message
            run.executor.update(message.slowdown, now, message)
            if message.action == "start":
                self._event(run, "started", run.executor.poll(now))
            return True
        if message.action == "update" and run is None and message.job_id in self._ended:
            log.info(
                "%s: update of job %d, which %s here; ignored",
                self.node,
                message.job_id,
                self._ended[message.job_id],
            )
            return False
        if run is not None:  # new GPUs or sub-batch: restart from the progress made so far
            run.executor.stop(now)
            progress = run.executor.poll(now).iterations_done
            log.info(
                "%s: job %d restarts with a new placement at %.1f iterations",
                self.node,
                message.job_id,
                progress,
            )
            del self._runs[message.job_id]
            run.log.write("[sharewise-agent] restarting with a new placement")
            run.end_output()
            self._retiring.append(run.executor)
            message = replace(message, iterations_done=max(message.iterations_done, progress))
        self._start(message, now)
        return True

    def _retire_stopping(self, job_id: int) -> None:
        # An earlier run of the job still exiting is superseded: keep polling it, report nothing.
        older = self._stopping.pop(job_id, None)
        if older is not None:
            older.end_output()
            self._retiring.append(older.executor)

    def _start(self, message: PlacementMessage, now: float) -> None:
        known = {g.index for g in self._gpus}
        missing = sorted(set(message.gpu_indices) - known)
        job_log = self.logs.open(message.job_id, f"{self.node}/g{message.generation}")
        try:
            if missing:
                raise ExecutorError(f"GPU indices {missing} do not exist on node {self.node}")
            executor = self._factory(message, now)
        except ExecutorError as exc:
            log.error("%s: job %d cannot start: %s", self.node, message.job_id, exc)
            job_log.write(f"[sharewise-agent] the job could not start on {self.node}: {exc}")
            job_log.close()
            self._ended[message.job_id] = "failed"
            self._events.append(
                JobEventReport(
                    self.node,
                    message.job_id,
                    message.generation,
                    "failed",
                    int(message.iterations_done),
                    None,
                    str(exc),
                )
            )
            return
        self._ended.pop(message.job_id, None)
        run = _Run(message, executor, now, int(message.iterations_done), job_log)
        self._runs[message.job_id] = run
        self._event(run, "started", Status("running", message.iterations_done))

    def _event(self, run: _Run, kind: EventKind, status: Status) -> JobEventReport:
        event = JobEventReport(
            self.node,
            run.message.job_id,
            run.message.generation,
            kind,
            int(status.iterations_done),
            status.iter_time_s,
            status.reason,
            status.memory_mb,
            status.failure_kind,
        )
        self._events.append(event)
        return event

    # -- time passing -------------------------------------------------------------------------

    def step(self, now: float | None = None) -> list[JobEventReport]:
        """Advance every job to wall time ``now`` (s; default: the clock) and return new events.

        Events come in the order they happened: those made by :meth:`apply` since the last
        step, then ``finished`` / ``failed`` / ``stopped`` / ``progress`` of each job.
        """
        now = self._clock() if now is None else now
        with self._lock:
            for job_id, run in list(self._runs.items()):
                status = run.executor.poll(now)
                run.collect_output()
                if status.state in ("finished", "failed", "stopped"):
                    del self._runs[job_id]
                    self._ended[job_id] = status.state
                    run.end_output()
                    self._event(run, status.state, status)
                elif (
                    now - run.last_progress_at >= self._progress_every_s
                    and int(status.iterations_done) > run.last_reported
                ):
                    run.last_progress_at = now
                    run.last_reported = int(status.iterations_done)
                    self._event(run, "progress", status)
            for job_id, run in list(self._stopping.items()):
                status = run.executor.poll(now)
                run.collect_output()
                if status.state != "running":
                    del self._stopping[job_id]
                    self._ended[job_id] = "stopped"
                    run.end_output()
                    self._event(
                        run,
                        "stopped",
                        Status(
                            "stopped",
                            status.iterations_done,
                            status.iter_time_s,
                            run.stop_reason,
                            status.memory_mb,
                        ),
                    )
            self._retiring = [e for e in self._retiring if e.poll(now).state == "running"]
            events, self._events = self._events, []
        return events

    def heartbeat(self) -> Heartbeat:
        """The node's heartbeat: its GPUs and the jobs it runs (with their progress now)."""
        now = self._clock()
        with self._lock:
            running = tuple(
                {
                    "job_id": job_id,
                    "generation": run.message.generation,
                    "iterations_done": int(run.executor.poll(now).iterations_done),
                }
                for job_id, run in sorted(self._runs.items())
            )
            return Heartbeat(self.node, tuple(g.to_payload() for g in self._gpus), running, self.executor)

    def set_gpus(self, gpus: Iterable[GpuInfo]) -> None:
        """Replace the node's GPUs (after a new NVML probe: a GPU may have become unhealthy)."""
        with self._lock:
            self._gpus = tuple(gpus)

    @property
    def gpus(self) -> tuple[GpuInfo, ...]:
        """The node's GPUs as last discovered."""
        with self._lock:
            return self._gpus

    @property
    def running(self) -> dict[int, int]:
        """Jobs running here → the generation applied for each."""
        with self._lock:
            return {job_id: run.message.generation for job_id, run in self._runs.items()}

    def shutdown(self, now: float | None = None) -> None:
        """Stop every job (the agent is exiting); their ``stopped`` events come from the next step."""
        now = self._clock() if now is None else now
        with self._lock:
            for job_id, run in list(self._runs.items()):
                run.executor.stop(now)
                run.stop_reason = "the agent shut down"
                self._retire_stopping(job_id)
                self._stopping[job_id] = run
            self._runs.clear()

    @property
    def busy(self) -> bool:
        """Whether any job is running or still stopping."""
        with self._lock:
            return bool(self._runs or self._stopping or self._retiring)


def route(agents: Mapping[str, Agent], message: dict[str, Any]) -> bool:
    """Hand one placement message to the agent of its ``node`` among ``agents`` (a node name →
    agent map) — what both transports do with each message, the Celery task and the pull loop
    (``agent.puller``). Returns :meth:`Agent.apply`'s answer; ``False`` (logged) for a node this
    process does not serve."""
    agent = agents.get(message.get("node"))  # type: ignore[arg-type]
    if agent is None:
        log.error("placement for node %r, which this agent does not serve: %r", message.get("node"), message)
        return False
    return agent.apply(message)
