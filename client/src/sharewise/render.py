"""How jobs look in a terminal: tables like ``squeue``'s (rich), times and progress in words.

Tables have no borders, one job per line, so ``grep`` and ``awk`` work on them; on a terminal the
header is bold and a long reason folds instead of widening the table. ``--output json`` bypasses
all of this (the API's objects as they are).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table


def console(file: TextIO | None = None) -> Console:
    """A rich console on ``file`` (stdout): styles only on a terminal, and elsewhere a width of at
    least 160 columns so a piped table does not wrap."""
    stream = file or sys.stdout
    tty = stream.isatty()
    width = None if tty else max(160, shutil.get_terminal_size((160, 24)).columns)
    return Console(file=stream, width=width, no_color=not tty, highlight=False, soft_wrap=not tty)


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


def jobs_table(jobs: Sequence[Mapping[str, Any]], now: datetime | None = None) -> Table:
    """``ID NAME STATUS GPUS PROGRESS SUBMITTED WHERE/ETA REASON``, one row per job."""
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for name, justify in (
        ("ID", "right"),
        ("NAME", "left"),
        ("STATUS", "left"),
        ("GPUS", "right"),
        ("PROGRESS", "right"),
        ("SUBMITTED", "right"),
        ("NODES / START", "left"),
        ("REASON", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold", no_wrap=name != "REASON")  # type: ignore[arg-type]
    for job in jobs:
        where = eta(job.get("estimated_start_at"), now) if job.get("status") == "pending" else gpus_of(job)
        table.add_row(
            str(job.get("id")),
            str(job.get("name")),
            str(job.get("status")),
            str(job.get("gpus")),
            progress(job),
            ago(job.get("submitted_at"), now),
            where,
            why(job),
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


def dump_json(value: Any, file: TextIO | None = None) -> None:
    """``value`` as indented JSON and a newline."""
    (file or sys.stdout).write(json.dumps(value, indent=2, sort_keys=False) + "\n")
