"""How jobs and quota standing look in a terminal: tables like ``squeue``'s (rich), times and
progress in words.

Tables have no borders, one job per line, so ``grep`` and ``awk`` work on them; on a terminal the
header is bold and a long reason is cut at its column (``…``) instead of widening the table.
``--output json`` bypasses all of this (the API's objects as they are).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text


class PipeConsole(Console):
    """A rich console that leaves a closed pipe (``sharewise show 1 | head -1``) to the command's
    one handler (:mod:`sharewise.pipes`, status 0); rich's own exits with status 1."""

    def on_broken_pipe(self) -> None:
        """Raise the :class:`BrokenPipeError` rich caught."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def console(file: TextIO | None = None) -> Console:
    """A rich console on ``file`` (stdout): styles only on a terminal, and elsewhere a width of at
    least 160 columns so a piped table does not wrap."""
    stream = file or sys.stdout
    tty = stream.isatty()
    width = None if tty else max(160, shutil.get_terminal_size((160, 24)).columns)
    return PipeConsole(file=stream, width=width, no_color=not tty, highlight=False, soft_wrap=not tty)


def emit(*renderables: Any, file: TextIO | None = None) -> None:
    """Print ``renderables`` (tables, text) one after the other with a blank line between them; off
    a terminal as plain lines without the padding rich adds at their ends."""
    stream = file or sys.stdout
    out = console(stream)
    for i, renderable in enumerate(renderables):
        if i:
            stream.write("\n")
        if stream.isatty():
            out.print(renderable)
            continue
        with out.capture() as captured:
            out.print(renderable)
        stream.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 timestamp of the API (``...Z`` or ``+00:00``) as an aware datetime, or ``None``."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration(seconds: float) -> str:
    """``42s``, ``5m03s``, ``2h05m``, ``3d04h`` (whole seconds; negative as 0s)."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def ago(text: str | None, now: datetime | None = None) -> str:
    """How long before ``now`` the timestamp ``text`` was (``5m03s ago``); ``-`` for none."""
    moment = parse_time(text)
    if moment is None:
        return "-"
    return f"{duration(((now or datetime.now(UTC)) - moment).total_seconds())} ago"


def eta(text: str | None, now: datetime | None = None) -> str:
    """An estimated start as ``in 5m03s (14:05 UTC)``, ``now`` when it is due, ``-`` for none."""
    moment = parse_time(text)
    if moment is None:
        return "-"
    left = (moment - (now or datetime.now(UTC))).total_seconds()
    clock = moment.astimezone(UTC).strftime("%H:%M UTC")
    return f"now ({clock})" if left <= 0 else f"in {duration(left)} ({clock})"


def progress(job: Mapping[str, Any]) -> str:
    """``340/5,000 (6%)`` iterations."""
    done = float(job.get("iterations_done") or 0)
    total = int(job.get("iterations") or 0)
    share = f" ({100 * done / total:.0f}%)" if total else ""
    return f"{done:,.0f}/{total:,}{share}"


def gpus_of(job: Mapping[str, Any]) -> str:
    """The GPUs a job holds, by node: ``node-00:0,1 node-01:3``; ``-`` when it holds none."""
    by_node: dict[str, list[str]] = {}
    for p in job.get("placement") or ():
        by_node.setdefault(str(p.get("node")), []).append(str(p.get("gpu_index")))
    return " ".join(f"{node}:{','.join(idx)}" for node, idx in by_node.items()) or "-"


def gpu_types_of(job: Mapping[str, Any]) -> str:
    """The GPU types ``job`` accepts, ``a100,h100``; ``any`` when it names none."""
    return ",".join(str(t) for t in job.get("gpu_types") or ()) or "any"


def partners_of(job: Mapping[str, Any]) -> list[str]:
    """The jobs sharing a GPU with ``job``, each once (``job 12 bert-b``, or ``another tenant's
    job``), in placement order."""
    seen: list[str] = []
    for p in job.get("placement") or ():
        partner = p.get("partner")
        if partner and partner not in seen:
            seen.append(partner)
    return seen


def why(job: Mapping[str, Any]) -> str:
    """The one-line note of a job in a list: the pending reason, whom a running job shares with,
    or why it failed."""
    status = job.get("status")
    if status == "pending":
        return str(job.get("pending_reason") or "")
    if status == "running":
        partners = partners_of(job)
        return f"shares GPUs with {', '.join(partners)}" if partners else ""
    if status == "failed":
        return str(job.get("failure_reason") or "")
    return ""


def reason_cell(reason: str) -> Text:
    """``reason`` as one line cut at its column's width with ``…`` (newlines as spaces): a failure
    reason of 8,000 characters folded over a hundred lines of the table, which is one line per job;
    ``show`` and ``-o json`` keep the whole text."""
    return Text(" ".join(reason.split()), no_wrap=True, overflow="ellipsis")


def jobs_table(jobs: Sequence[Mapping[str, Any]], now: datetime | None = None) -> Table:
    """``ID NAME STATUS PRI GPUS TYPES PROGRESS SUBMITTED WHERE/ETA REASON``, one row per job
    (``PRI``: its priority; ``TYPES``: the GPU types it accepts, :func:`gpu_types_of`)."""
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for name, justify in (
        ("ID", "right"),
        ("NAME", "left"),
        ("STATUS", "left"),
        ("PRI", "right"),
        ("GPUS", "right"),
        ("TYPES", "left"),
        ("PROGRESS", "right"),
        ("SUBMITTED", "right"),
        ("NODES / START", "left"),
        ("REASON", "left"),
    ):
        # REASON alone may wrap, so it is the column narrowed to fit; its cell (below) is cut there
        table.add_column(name, justify=justify, overflow="fold", no_wrap=name != "REASON")  # type: ignore[arg-type]
    for job in jobs:
        where = eta(job.get("estimated_start_at"), now) if job.get("status") == "pending" else gpus_of(job)
        table.add_row(
            str(job.get("id")),
            str(job.get("name")),
            str(job.get("status")),
            str(job.get("priority", 0)),
            str(job.get("gpus")),
            gpu_types_of(job),
            progress(job),
            ago(job.get("submitted_at"), now),
            where,
            reason_cell(why(job)),
        )
    return table


def job_details(job: Mapping[str, Any], now: datetime | None = None) -> Table:
    """One job as ``field  value`` lines, its placement one line per GPU."""
    table = Table(box=None, show_header=False, pad_edge=False, show_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    rows: list[tuple[str, str]] = [
        ("id", str(job.get("id"))),
        ("name", str(job.get("name"))),
        ("status", str(job.get("status"))),
        ("model", str(job.get("model"))),
        ("batch size", f"{job.get('batch_size')} samples"),
        ("gpus", str(job.get("gpus"))),
        ("gpu types", gpu_types_of(job)),
        ("progress", f"{progress(job)} iterations"),
        ("priority", str(job.get("priority", 0))),
        ("command", str(job.get("command") or "-")),
        ("submitted", f"{job.get('submitted_at')} ({ago(job.get('submitted_at'), now)})"),
    ]
    if job.get("started_at"):
        rows.append(("started", f"{job['started_at']} ({ago(job['started_at'], now)})"))
    if job.get("finished_at"):
        rows.append(("finished", f"{job['finished_at']} ({ago(job['finished_at'], now)})"))
    if job.get("status") == "pending":
        rows.append(("waiting because", str(job.get("pending_reason") or "-")))
        rows.append(("estimated start", eta(job.get("estimated_start_at"), now)))
    if job.get("failure_reason"):
        rows.append(("failure", str(job["failure_reason"])))
    for p in job.get("placement") or ():
        partner = f", shares it with {p['partner']}" if p.get("partner") else ", alone"
        rows.append(
            ("placement", f"{p.get('node')}:{p.get('gpu_index')} sub-batch {p.get('sub_batch')}{partner}")
        )
    for field, value in rows:
        table.add_row(field, value)
    return table


def events_table(events: Iterable[Mapping[str, Any]]) -> Table:
    """``TIME KIND MESSAGE`` of a job's history, oldest first."""
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    table.add_column("TIME", no_wrap=True)
    table.add_column("EVENT", no_wrap=True)
    table.add_column("DETAILS", overflow="fold")
    for event in events:
        moment = parse_time(event.get("at"))
        when = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else str(event.get("at"))
        table.add_row(when, str(event.get("kind")), event_details(event))
    return table


def event_details(event: Mapping[str, Any]) -> str:
    """The message of an event, with the useful parts of its data (GPUs, node, progress)."""
    data = event.get("data") or {}
    message = str(event.get("message") or "")
    parts = [message]
    if data.get("gpus") and not message:
        parts.append("on " + " ".join(map(str, data["gpus"])))
    if data.get("sub_batch"):
        parts.append(f"sub-batch {data['sub_batch']} x {data.get('accum_steps') or 1}")
    if data.get("node") and not data.get("gpus"):
        parts.append(f"node {data['node']}")
    if data.get("iterations_done") is not None and event.get("kind") != "placed":
        parts.append(f"at {float(data['iterations_done']):,.0f} iterations")
    return "; ".join(p for p in parts if p)


def gpus(value: Any) -> str:
    """A GPU count that may be fractional (a shared GPU split by normalised progress): ``2``,
    ``1.5``, ``0.33`` (two decimals at most); ``unlimited`` for ``None`` (no borrow limit)."""
    if value is None:
        return "unlimited"
    number = float(value)
    return f"{number:.0f}" if number.is_integer() else f"{number:.2f}".rstrip("0")


def window(seconds: int) -> str:
    """A window as ``?windows=`` spells it: ``2h``, ``24h``, ``7d``, ``90m``, ``75s``."""
    if seconds > 86400 and seconds % 86400 == 0:
        return f"{seconds // 86400}d"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def quota_table(quota: Mapping[str, Any]) -> Table:
    """``QUOTA IN-USE GUARANTEED BORROW-LIMIT BORROWED OVER-QUOTA`` of the tenant API's
    ``usage.quota``: the total, then one row per quota row (``any``: the row for any GPU type)."""
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for name in ("QUOTA", "IN USE", "GUARANTEED", "BORROW LIMIT", "BORROWED", "OVER QUOTA"):
        table.add_column(name, justify="left" if name == "QUOTA" else "right", no_wrap=True)
    rows = [("total", quota.get("total") or {})]
    rows += [(f"type {r.get('gpu_type') or 'any'}", r) for r in quota.get("per_gpu_type") or ()]
    for label, row in rows:
        table.add_row(
            label,
            gpus(row.get("gpus_in_use", 0)),
            gpus(row.get("guaranteed_gpus", 0)),
            gpus(row.get("borrow_limit")),
            gpus(row.get("gpus_borrowed", 0)),
            gpus(row.get("gpus_over_quota", 0)),
        )
    return table


def gpu_hours_table(
    windows: Iterable[Mapping[str, Any]], fairness: Iterable[Mapping[str, Any]] = ()
) -> Table:
    """``WINDOW GPU-HOURS QUOTA-GPU-HOURS SHARE JAIN`` per window of the tenant API's
    ``usage.gpu_hours`` (GPU-hours to two decimals; share of quota in %, ``-`` without a
    guarantee) with the cluster-wide Jain's index of the same window (``-``: no tenant demanded)."""
    jain = {f.get("window_s"): f.get("jain_index") for f in fairness}
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for name in ("WINDOW", "GPU-HOURS", "QUOTA GPU-HOURS", "SHARE OF QUOTA", "CLUSTER JAIN"):
        table.add_column(name, justify="left" if name == "WINDOW" else "right", no_wrap=True)
    for w in windows:
        share, index = w.get("share_of_quota"), jain.get(w.get("window_s"))
        table.add_row(
            window(int(w.get("window_s") or 0)),
            f"{float(w.get('gpu_hours') or 0):.2f}",
            f"{float(w.get('quota_gpu_hours') or 0):.2f}",
            "-" if share is None else f"{100 * float(share):.0f}%",
            "-" if index is None else f"{float(index):.3f}",
        )
    return table


def dump_json(value: Any, file: TextIO | None = None) -> None:
    """``value`` as indented JSON and a newline."""
    (file or sys.stdout).write(json.dumps(value, indent=2, sort_keys=False) + "\n")
