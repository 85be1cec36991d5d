"""The demo's submissions over HTTP: a JSON POST, and the same retried when the service answers
429 (the per-tenant submission throttle), after the wait its ``Retry-After`` header asks for;
jobs due together sent as one bulk submission (``POST /api/v1/jobs/bulk/``).

Bounded: at most :data:`ATTEMPTS` tries and :data:`MAX_WAIT_S` wall seconds per wait; the job's
``Idempotency-Key`` makes a retry safe (a first try that was in fact accepted answers the same job).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from scheduling.core import types as core

#: Tries of one submission refused with 429 before the demo gives it up **(ours)**.
ATTEMPTS = 6
#: Longest wait (wall s) for one ``Retry-After`` **(ours)**: the default throttle's window is 60 s.
MAX_WAIT_S = 60.0
#: Wait (wall s) when a 429 carries no usable ``Retry-After`` **(ours)**.
DEFAULT_WAIT_S = 1.0
#: Most jobs of one bulk submission the demo sends **(ours)**: under the service's 500 and its
#: 64 KiB body limit.
BULK_SIZE = 200


def post_json(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float = 30.0) -> Any:
    """POST ``body`` as JSON; the decoded answer. Raises ``urllib.error.HTTPError`` for 4xx/5xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read() or b"null")


def retry_after_s(value: str | None, now: datetime | None = None) -> float:
    """The wait (s, in ``[0, MAX_WAIT_S]``) a ``Retry-After`` header asks for: delay-seconds or an
    HTTP-date (RFC 9110 §10.2.3); :data:`DEFAULT_WAIT_S` when absent or unreadable."""
    if value is None or not value.strip():
        return DEFAULT_WAIT_S
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return DEFAULT_WAIT_S
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return DEFAULT_WAIT_S
    return min(MAX_WAIT_S, max(0.0, seconds))


def post_with_retry(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    wait: Callable[[float], bool],
    attempts: int = ATTEMPTS,
) -> Any:
    """:func:`post_json`, tried again after ``wait(retry_after_s(...))`` while the answer is 429,
    at most ``attempts`` times in all. ``wait(s)`` sleeps ``s`` wall seconds and returns ``True``
    when the demo is stopping (e.g. ``threading.Event.wait``), which ends the retries.

    Returns the decoded answer. Raises ``urllib.error.HTTPError``: any other 4xx/5xx at once, the
    last 429 when the tries are spent or the demo stops; ``ValueError`` when ``attempts < 1``.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    attempt = 1
    while True:
        try:
            return post_json(url, body, headers)
        except urllib.error.HTTPError as exc:
            if exc.code != 429 or attempt >= attempts or wait(retry_after_s(exc.headers.get("Retry-After"))):
                raise
        attempt += 1


def job_body(job: core.Job) -> dict[str, Any]:
    """The API's fields of a trace job (``job-<id>``, its model, batch, iterations, GPUs, speed;
    its priority when not 0 and ``sharing: never`` when it may not share, as the simulator sees
    them)."""
    body: dict[str, Any] = {
        "name": f"job-{job.id}",
        "model": job.model,
        "batch_size": job.batch_size,
        "iterations": job.iterations,
        "gpus": job.gpus,
        "iteration_time_s": job.iter_time_s,
    }
    if job.memory_mb is not None:
        body["gpu_memory_mb"] = math.ceil(job.memory_mb)
    if job.priority:
        body["priority"] = job.priority
    if not job.sharing_allowed:
        body["sharing"] = "never"
    return body


def submit_jobs(
    base_url: str, token: str, jobs: Sequence[core.Job], wait: Callable[[float], bool]
) -> tuple[dict[int, int], list[str]]:
    """Submit one tenant's ``jobs`` (at most :data:`BULK_SIZE`) with its API ``token``: one POST
    for one job, one bulk POST for several (each keyed ``demo-<trace id>``, so nothing is made
    twice), one by one again when the bulk one is refused with 400 (so one bad job refuses only
    itself). 429s are retried (:func:`post_with_retry`). Returns ``{database id: trace id}`` of
    the jobs accepted and a message per job refused."""
    auth = {"Authorization": f"Token {token}"}
    made: dict[int, int] = {}
    if len(jobs) > 1:
        items = [{**job_body(job), "idempotency_key": f"demo-{job.id}"} for job in jobs]
        try:
            answer = post_with_retry(f"{base_url}/api/v1/jobs/bulk/", {"jobs": items}, auth, wait)
        except urllib.error.HTTPError as exc:
            if exc.code != 400:
                text = exc.read(300).decode(errors="replace")
                return made, [f"job {job.id} refused: HTTP {exc.code} {text}" for job in jobs]
        else:
            return {int(a["id"]): job.id for a, job in zip(answer["jobs"], jobs, strict=True)}, []
    errors = []
    for job in jobs:
        headers = {**auth, "Idempotency-Key": f"demo-{job.id}"}
        try:
            answer = post_with_retry(f"{base_url}/api/v1/jobs/", job_body(job), headers, wait)
        except urllib.error.HTTPError as exc:
            errors.append(f"job {job.id} refused: HTTP {exc.code} {exc.read(300).decode(errors='replace')}")
            continue
        made[int(answer["id"])] = job.id
    return made, errors
