"""Trace loaders: turn the public job traces into :class:`scheduling.core.types.Job` tuples.

One loader per format of ``shared/data/README.md`` (units checked against the files):

- **Tiresias/Muri CSV** (``job_id,num_gpu,submit_time,iterations,model_name,batch_size,…,
  iteration_time,…,priority``): ``submit_time`` in **ms** → s; ``iteration_time`` in **ms per
  iteration** → ``iter_time_s = iteration_time / 1000``; tenant ``"default"`` (the format has
  none); batch size from ``batch_size``; ``priority`` kept.
- **Chronus CSV** (Tiresias columns plus ``user``, no ``batch_size``): ``submit_time`` and
  ``duration`` in **seconds**; ``iter_time_s = duration / iterations``; tenant = ``user`` (a
  Philly virtual cluster); batch size :data:`CHRONUS_BATCH_SIZE` (the trace gives none).
- **Gavel per-VC TSV** (7 tab-separated columns, no header: ``job_type, command,
  num_steps_arg, needs_data_dir, total_steps, arrival_time_s, scale_factor``): tenant = the file
  stem (the VC id); ``gpus = scale_factor``; ``iterations = total_steps``; ``iter_time_s =
  1 / throughput(job_type, gpus)`` with the isolated V100 throughput (steps/s) of Gavel's
  measurements; model and batch size from ``"<model> (batch size N)"`` (no batch size → 1, so
  no smaller sub-batch is ever offered). A folder loads every ``*.trace`` file in it.

No format carries per-job memory, so ``memory_mb`` is ``None`` (the profile's default for the
model). Impossible rows are never fatal: each is skipped with a logged reason and counted in
:attr:`LoadedTrace.rejected`. A gang larger than the cluster's healthy GPUs is **rejected, not
capped**: shrinking a gang would change the job's speed and its all-or-nothing meaning.

Bounds (:mod:`common.limits`, the API's own where it has one): a row is rejected for a batch
size above :data:`~common.limits.MAX_BATCH_SIZE`, more iterations than
:data:`~common.limits.MAX_ITERATIONS` (Tiresias and Chronus; Gavel's published ``total_steps``
run to 8.7×10⁸, so a Gavel row is bounded by its times alone), a time per iteration above
:data:`~common.limits.MAX_ITERATION_TIME_S`, or a submit time or exclusive run time
(iterations × time per iteration) above :data:`~common.limits.MAX_TRACE_TIME_S` (ten years,
ours); with no cluster given, a gang above :data:`common.shapes.MAX_TOTAL_GPUS`. So every
accepted job is one the API would accept, and the metrics' sums and squares stay finite.

Job ids: the trace's ``job_id`` values when they are unique over everything loaded; otherwise
(several files, or Gavel traces, which have no id) ids are renumbered 0…N−1 in load order.
Jobs are returned sorted by ``(submit_time, id)``; the files themselves need not be sorted.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from common.limits import MAX_BATCH_SIZE, MAX_ITERATION_TIME_S, MAX_ITERATIONS, MAX_TRACE_TIME_S
from common.shapes import MAX_TOTAL_GPUS
from scheduling.core.types import Job
from scheduling.datapaths import trace_path

log = logging.getLogger(__name__)

#: Global batch size given to Chronus jobs, whose trace has no batch-size column (ours: 32 is a
#: batch size every model family of the default profile was measured at).
CHRONUS_BATCH_SIZE = 32
DEFAULT_TENANT = "default"

#: Throughput lookup used by the Gavel loader: ``(job_type, num_gpus) -> steps/s`` (V100).
ThroughputFn = Callable[[str, int], float]

REASON_ZERO_GPUS = "asks for 0 GPUs"
REASON_NEGATIVE_GPUS = "asks for a negative number of GPUs"
REASON_TOO_MANY_GPUS = "asks for more GPUs than the cluster has"
REASON_NO_ITERATIONS = "no iterations to run"
REASON_BAD_TIME = "non-positive or non-finite iteration time"
REASON_MALFORMED = "malformed row"
REASON_TOO_MANY_ITERATIONS = f"more than {MAX_ITERATIONS:,} iterations, the API's bound"
REASON_BATCH_TOO_LARGE = f"batch size above {MAX_BATCH_SIZE:,}, the API's bound"
REASON_ITERATION_TOO_LONG = f"time per iteration above {MAX_ITERATION_TIME_S:,.0f} s, the API's bound"
REASON_RUN_TOO_LONG = f"run time above ten years, {MAX_TRACE_TIME_S:,.0f} s"
REASON_SUBMIT_TOO_LATE = f"submit time after ten years, {MAX_TRACE_TIME_S:,.0f} s"
REASON_NO_THROUGHPUT = "no measured throughput for job type and GPU count"

TIRESIAS_COLUMNS = frozenset(
    {"job_id", "num_gpu", "submit_time", "iterations", "model_name", "batch_size", "iteration_time"}
)
CHRONUS_COLUMNS = frozenset(
    {"job_id", "user", "num_gpu", "submit_time", "iterations", "model_name", "duration"}
)
GAVEL_SUFFIXES = (".trace", ".tsv")
_BATCH_RE = re.compile(r"^(?P<model>.*?)\s*\(batch size (?P<batch>\d+)\)\s*$")


class TraceError(ValueError):
    """A trace that cannot be read at all (missing file, unknown format, no usable job)."""


class TraceNotFoundError(TraceError):
    """The trace path does not exist."""


class UnknownTraceFormatError(TraceError):
    """The file is none of the supported formats (the message lists them)."""


class _RejectRow(Exception):
    """Internal: one row is impossible; ``reason`` is one of the ``REASON_*`` strings."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    """Jobs read from one or more trace files.

    ``jobs``: accepted jobs sorted by ``(submit_time, id)``; ``rejected``: reason → number of
    rows skipped; ``rows``: data rows read (accepted + rejected); ``name``: the inputs' names
    joined by ``+``; ``formats``: the formats detected, in load order.
    """

    name: str
    jobs: tuple[Job, ...]
    rejected: dict[str, int]
    rows: int
    formats: tuple[str, ...]

    @property
    def tenants(self) -> tuple[str, ...]:
        """Tenants of the accepted jobs, sorted."""
        return tuple(sorted({j.tenant for j in self.jobs}))


def _whole(text: str) -> int:
    value = float(text)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"not a whole number: {text!r}")
    return int(value)


def _check_job(
    gpus: int, iterations: int, submit: float, max_gpus: int | None, *, cap_iterations: bool = True
) -> None:
    if gpus < 0:
        raise _RejectRow(REASON_NEGATIVE_GPUS, f"num_gpu={gpus}")
    if gpus == 0:
        raise _RejectRow(REASON_ZERO_GPUS, f"num_gpu={gpus}")
    limit = MAX_TOTAL_GPUS if max_gpus is None else max_gpus
    if gpus > limit:
        raise _RejectRow(REASON_TOO_MANY_GPUS, f"num_gpu={gpus} > {limit}")
    if iterations <= 0:
        raise _RejectRow(REASON_NO_ITERATIONS, f"iterations={iterations}")
    if cap_iterations and iterations > MAX_ITERATIONS:
        raise _RejectRow(REASON_TOO_MANY_ITERATIONS, f"iterations={iterations}")
    if not (math.isfinite(submit) and submit >= 0):
        raise _RejectRow(REASON_MALFORMED, f"submit_time={submit}")
    if submit > MAX_TRACE_TIME_S:
        raise _RejectRow(REASON_SUBMIT_TOO_LATE, f"submit_time={submit:g} s")


def _check_times(iterations: int, iter_time_s: float) -> None:
    if not (math.isfinite(iter_time_s) and iter_time_s > 0):
        raise _RejectRow(REASON_BAD_TIME, f"iter_time_s={iter_time_s}")
    # The whole run first: a Chronus row gives its duration, and that is the number to name.
    run_s = iterations * iter_time_s
    if run_s > MAX_TRACE_TIME_S:
        raise _RejectRow(REASON_RUN_TOO_LONG, f"{iterations} iterations x {iter_time_s:g} s = {run_s:g} s")
    if iter_time_s > MAX_ITERATION_TIME_S:
        raise _RejectRow(REASON_ITERATION_TOO_LONG, f"iter_time_s={iter_time_s:g}")


def _tiresias_row(row: dict[str, str], max_gpus: int | None) -> tuple[int, Job]:
    gpus = _whole(row["num_gpu"])
    iterations = _whole(row["iterations"])
    iter_time_s = float(row["iteration_time"]) / 1000.0  # ms per iteration -> s
    submit = float(row["submit_time"]) / 1000.0  # ms -> s
    _check_job(gpus, iterations, submit, max_gpus)
    _check_times(iterations, iter_time_s)
    batch = _whole(row["batch_size"])
    if batch <= 0:
        raise _RejectRow(REASON_MALFORMED, f"batch_size={batch}")
    if batch > MAX_BATCH_SIZE:
        raise _RejectRow(REASON_BATCH_TOO_LARGE, f"batch_size={batch}")
    job_id = _whole(row["job_id"])
    priority = _whole(row["priority"]) if row.get("priority") not in (None, "") else 0
    return job_id, Job(
        job_id,
        DEFAULT_TENANT,
        row["model_name"],
        batch,
        gpus,
        iterations,
        submit,
        iter_time_s,
        priority=priority,
    )


def _chronus_row(row: dict[str, str], max_gpus: int | None) -> tuple[int, Job]:
    gpus = _whole(row["num_gpu"])
    iterations = _whole(row["iterations"])
    duration = float(row["duration"])  # seconds
    submit = float(row["submit_time"])  # seconds
    _check_job(gpus, iterations, submit, max_gpus)
    _check_times(iterations, duration / iterations)
    iter_time_s = duration / iterations
    tenant = row["user"].strip()
    if not tenant:
        raise _RejectRow(REASON_MALFORMED, "empty user")
    job_id = _whole(row["job_id"])
    return job_id, Job(
        job_id, tenant, row["model_name"], CHRONUS_BATCH_SIZE, gpus, iterations, submit, iter_time_s
    )


def parse_gavel_job_type(job_type: str) -> tuple[str, int]:
    """``"ResNet-50 (batch size 64)"`` → ``("ResNet-50", 64)``; ``"A3C"`` → ``("A3C", 1)``."""
    match = _BATCH_RE.match(job_type)
    if match is None:
        return job_type.strip(), 1
    return match["model"], int(match["batch"])


def _gavel_row(
    fields: list[str], tenant: str, max_gpus: int | None, throughput: ThroughputFn
) -> tuple[None, Job]:
    if len(fields) != 7:
        raise _RejectRow(REASON_MALFORMED, f"{len(fields)} columns, expected 7")
    job_type = fields[0].strip()
    iterations = _whole(fields[4])
    submit = float(fields[5])
    gpus = _whole(fields[6])
    _check_job(gpus, iterations, submit, max_gpus, cap_iterations=False)
    try:
        steps_per_s = float(throughput(job_type, gpus))
    except (KeyError, ValueError, LookupError) as exc:
        raise _RejectRow(REASON_NO_THROUGHPUT, f"{job_type!r} on {gpus} GPUs: {exc}") from None
    if not (math.isfinite(steps_per_s) and steps_per_s > 0):
        raise _RejectRow(REASON_NO_THROUGHPUT, f"{job_type!r} on {gpus} GPUs")
    _check_times(iterations, 1.0 / steps_per_s)
    model, batch = parse_gavel_job_type(job_type)
    if batch > MAX_BATCH_SIZE:
        raise _RejectRow(REASON_BATCH_TOO_LARGE, f"batch size {batch}")
    return None, Job(0, tenant, model, batch, gpus, iterations, submit, 1.0 / steps_per_s)


def is_bare_name(path: Path) -> bool:
    """Whether ``path`` is a file name alone (``t.csv``), not a path (``./t.csv``, ``../d/t.csv``,
    ``/d/t.csv``): a bare name missing here is looked for among the public traces."""
    return not path.is_absolute() and len(path.parts) == 1 and path.parts[0] not in (".", "..")


def resolve_trace(path: Path) -> Path:
    """``path`` itself when it exists or is a path; for a bare file name missing from the current
    folder, the public trace of that name (:func:`scheduling.datapaths.trace_path`) when there is
    one. Never raises: a missing trace is :func:`detect_format`'s error."""
    if path.exists() or not is_bare_name(path):
        return path
    shared = trace_path(path.name)
    return shared if shared.exists() else path


def missing_trace_message(path: Path) -> str:
    """Why ``path`` (missing) was not found, and where to look. A bare name was looked for in the
    shared data folder too (``$SHAREWISE_DATA_DIR``, else ``../shared/data`` beside the checkout),
    so the message names that folder and the setting, as it does for a path into that folder (the
    benchmarks resolve names so); for another path the setting would not help, so it says the file
    does not exist, and where the public trace of that file name is, if any (the
    README's commands name traces relative to a checkout beside that folder)."""
    shared = trace_path(path.name)
    if is_bare_name(path):
        return (
            f"trace not found: {path} (neither in the current folder nor among the public traces in "
            f"{shared.parent}; set SHAREWISE_DATA_DIR to the folder holding traces/)"
        )
    if path.parent.resolve() == shared.parent.resolve():  # a path into the public traces (the benchmarks')
        return (
            f"trace not found: {path} (not among the public traces in {shared.parent}; "
            "set SHAREWISE_DATA_DIR to the folder holding traces/)"
        )
    found = f"; the public trace of that name is at {shared}" if shared.is_file() else ""
    return f"trace not found: {path}: no such file or folder{found}"


def detect_format(path: Path) -> str:
    """``"gavel"``, ``"tiresias"`` or ``"chronus"`` for a file; raises :class:`TraceError`.

    A directory is a Gavel folder; ``.trace``/``.tsv`` files are Gavel; a CSV is told apart by
    its header (``user`` → Chronus; ``iteration_time`` and ``batch_size`` → Tiresias/Muri).
    """
    if not path.exists():
        raise TraceNotFoundError(missing_trace_message(path))
    if path.is_dir() or path.suffix.lower() in GAVEL_SUFFIXES:
        return "gavel"
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            header = {h.strip() for h in next(csv.reader(fh), [])}
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UnknownTraceFormatError(f"{path}: not a text trace ({exc})") from None
    if CHRONUS_COLUMNS <= header:
        return "chronus"
    if TIRESIAS_COLUMNS <= header:
        return "tiresias"
    raise UnknownTraceFormatError(
        f"{path}: unknown trace format; expected a Tiresias/Muri CSV (columns "
        f"{', '.join(sorted(TIRESIAS_COLUMNS))}), a Chronus CSV (columns "
        f"{', '.join(sorted(CHRONUS_COLUMNS))}) or a Gavel .trace file/folder"
    )


def _reject(counts: Counter[str], where: str, reason: str, detail: str) -> None:
    counts[reason] += 1
    log.info("rejected %s: %s (%s)", where, reason, detail)


def _csv_rows(
    path: Path, fmt: str, max_gpus: int | None, counts: Counter[str]
) -> Iterator[tuple[int | None, Job]]:
    parse = _tiresias_row if fmt == "tiresias" else _chronus_row
    required = TIRESIAS_COLUMNS if fmt == "tiresias" else CHRONUS_COLUMNS
    with path.open(newline="", encoding="utf-8") as fh:
        for line_no, row in enumerate(csv.DictReader(fh), start=2):
            # A short row: csv fills the columns it lacks with None; name them (in header order).
            missing = [name for name, value in row.items() if value is None and name.strip() in required]
            if missing:
                given = sum(1 for name, value in row.items() if name is not None and value is not None)
                detail = f"missing column(s) {', '.join(missing)}: {given} of {len(row)} fields given"
                _reject(counts, f"{path.name}:{line_no}", REASON_MALFORMED, detail)
                continue
            try:
                yield parse(row, max_gpus)
            except _RejectRow as rej:
                _reject(counts, f"{path.name}:{line_no}", rej.reason, rej.detail)
            except (KeyError, TypeError, ValueError) as exc:
                _reject(counts, f"{path.name}:{line_no}", REASON_MALFORMED, str(exc))


def _gavel_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in GAVEL_SUFFIXES)
        if not files:
            raise TraceError(f"{path}: folder holds no Gavel .trace files")
        return files
    return [path]


def _gavel_rows(
    path: Path, max_gpus: int | None, throughput: ThroughputFn | None, counts: Counter[str]
) -> Iterator[tuple[int | None, Job]]:
    if throughput is None:
        raise TraceError(f"{path}: a Gavel trace needs a throughput table (profile) to compute run times")
    for file in _gavel_files(path):
        tenant = file.stem
        with file.open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    yield _gavel_row(line.rstrip("\n").split("\t"), tenant, max_gpus, throughput)
                except _RejectRow as rej:
                    _reject(counts, f"{file.name}:{line_no}", rej.reason, rej.detail)
                except (TypeError, ValueError) as exc:
                    _reject(counts, f"{file.name}:{line_no}", REASON_MALFORMED, str(exc))


def load_traces(
    paths: Sequence[str | Path] | str | Path,
    *,
    max_gpus: int | None = None,
    throughput: ThroughputFn | None = None,
) -> LoadedTrace:
    """Load and merge one or more traces (files or Gavel folders).

    ``max_gpus``: the cluster's healthy GPUs; larger gangs are rejected (``None``: no limit).
    ``throughput``: ``(job_type, num_gpus) -> steps/s``, needed only for Gavel traces (e.g.
    ``TableProfile.isolated_throughput``); a lookup raising ``KeyError``/``ValueError`` or
    returning 0 rejects that row.

    Raises :class:`TraceNotFoundError`, :class:`UnknownTraceFormatError` or :class:`TraceError`
    (nothing loaded at all); never for a single bad row.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise TraceError("no trace given")
    counts: Counter[str] = Counter()
    loaded: list[tuple[int | None, Job]] = []
    formats: list[str] = []
    for raw in paths:
        path = resolve_trace(Path(raw))
        fmt = detect_format(path)
        formats.append(fmt)
        before = sum(counts.values())
        parsed = (
            _gavel_rows(path, max_gpus, throughput, counts)
            if fmt == "gavel"
            else _csv_rows(path, fmt, max_gpus, counts)
        )
        loaded.extend(parsed)
        skipped = sum(counts.values()) - before
        if skipped:
            log.warning("%s: %d row(s) rejected (see INFO log for each)", path, skipped)
    jobs = _assign_ids(loaded)
    rows = len(jobs) + sum(counts.values())
    if not jobs:
        raise TraceError(
            f"no usable job in {', '.join(str(p) for p in paths)} "
            f"({rows} rows read, rejected: {dict(counts) or 'none'})"
        )
    return LoadedTrace(
        name="+".join(Path(p).name for p in paths),
        jobs=tuple(sorted(jobs, key=lambda j: (j.submit_time, j.id))),
        rejected=dict(counts),
        rows=rows,
        formats=tuple(formats),
    )


def _assign_ids(loaded: Iterable[tuple[int | None, Job]]) -> list[Job]:
    items = list(loaded)
    ids = [i for i, _ in items]
    if None not in ids and len(set(ids)) == len(ids):
        return [job for _, job in items]
    return [replace(job, id=n) for n, (_, job) in enumerate(items)]
