"""The Python API of a Sharewise cluster, for one tenant: what the ``sharewise`` command is built on.

>>> from sharewise import Client
>>> client = Client()                      # SHAREWISE_API / SHAREWISE_TOKEN, or `sharewise login`
>>> job = client.submit({"name": "resnet-a", "model": "resnet50", "batch_size": 128,
...                      "iterations": 5000, "gpus": 4, "command": "python train.py"})
>>> for text in client.follow_logs(job["id"]):
...     print(text, end="")

Jobs, events and log pieces are the API's JSON objects as dicts (docs/API.md lists their fields),
so fields a newer service adds come through. Every call raises a
:class:`~sharewise.errors.SharewiseError` on failure, never a ``requests`` exception.

Retries (urllib3's ``Retry``): refused or dropped connections and 500/502/503/504 answers are
retried (at once, then after 1 s, 2 s and 4 s) for reads and for the two writes, which are
safe to repeat: a submission carries an ``Idempotency-Key`` (the same job comes back, never a
second one) and a cancel of a cancelled job changes nothing. A 429 is waited out (its
``Retry-After``) when that is at most ``max_throttle_wait_s``, up to three times.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from sharewise import __version__
from sharewise.config import API_PREFIX, Settings, check_token, normalise_api, resolve
from sharewise.errors import NotFound, ServiceError, UsageError, error_for, is_error_body
from sharewise.payload import check_fields

#: Job statuses after which nothing changes.
TERMINAL = ("succeeded", "failed", "cancelled")
#: Statuses of jobs that still hold or wait for GPUs.
ACTIVE = ("pending", "running")
#: Longest wait the service grants one log request (s); it may grant less (docs/API.md).
LOG_WAIT_S = 20.0
#: Page size of list requests (the service allows up to 500).
PAGE = 200
#: Jobs per bulk submission request: under the service's 500 and its 64 KiB body limit.
BULK_SIZE = 200


def new_idempotency_key() -> str:
    """A fresh ``Idempotency-Key`` (a random UUID)."""
    return str(uuid.uuid4())


class Client:
    """A tenant's session with the service at ``api`` (``http(s)://host:port``) using ``token``.

    Missing arguments come from ``SHAREWISE_API`` / ``SHAREWISE_TOKEN``, then from the file
    ``sharewise login`` wrote (:func:`sharewise.config.resolve`; :class:`UsageError` when none
    has them). ``timeout_s``: connect and read timeout of a request (s; a log request waits
    longer, by its ``wait_s``); ``retries``: attempts after the first for connection failures
    and 5xx answers; ``max_throttle_wait_s``: the longest 429 ``Retry-After`` waited out (s).
    A token that is not printable ASCII is a :class:`UsageError` (:func:`~sharewise.config.check_token`).
    """

    def __init__(
        self,
        api: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_throttle_wait_s: float = 10.0,
    ) -> None:
        settings = resolve(api, token) if not (api and token) else Settings(normalise_api(api), token)
        self.api = settings.api
        self.timeout_s = timeout_s
        self.max_throttle_wait_s = max_throttle_wait_s
        # whether an answer has shown that ``api`` is the service's base URL (its 404s are then
        # about what was asked for, not about the URL)
        self._api_checked = False
        self._session = requests.Session()
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=backoff_s,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=frozenset({"GET", "POST"}),
            raise_on_status=False,
            respect_retry_after_header=False,
        )
        adapter = HTTPAdapter(max_retries=retry)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update(
            {
                "Authorization": f"Token {check_token(settings.token)}",
                "Accept": "application/json",
                "User-Agent": f"sharewise-client/{__version__}",
            }
        )

    def close(self) -> None:
        """Close the connections kept open."""
        self._session.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ transport

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One call of the API (``path`` below ``/api/v1/``); the decoded JSON answer.

        Raises :class:`~sharewise.errors.ServiceError` (unreachable, 5xx, not JSON) or the
        :class:`~sharewise.errors.ApiError` of a 4xx (:func:`~sharewise.errors.error_for`); a 404
        at a base URL that is not the service's is a :class:`~sharewise.errors.UsageError`."""
        url = f"{self.api}{API_PREFIX}/{path.lstrip('/')}"
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        for attempt in range(4):
            try:
                response = self._session.request(
                    method, url, params=params, json=body, headers=headers, timeout=(10.0, timeout)
                )
            except requests.exceptions.Timeout:
                raise ServiceError(f"no answer from {self.api} within {timeout:.0f} s") from None
            except requests.exceptions.SSLError as exc:
                raise ServiceError(f"cannot reach {self.api}: {_tls_failure(self.api, exc)}") from None
            except requests.exceptions.RequestException as exc:
                raise ServiceError(f"cannot reach {self.api}: {_root_cause(exc)}") from None
            if response.status_code == 429 and attempt < 3:
                wait = _retry_after_s(response)
                if wait is not None and wait <= self.max_throttle_wait_s:
                    time.sleep(wait)
                    continue
            try:
                body = _decode(response, self.api)
            except NotFound:
                self._check_api(path)
                raise
            if response.status_code < 400:
                self._api_checked = True
            return body
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    def _check_api(self, asked: str) -> None:
        """After the API's own 404 for ``asked`` (a path below ``/api/v1/``): raise
        :class:`UsageError` when ``tenant/``, which the service always has, is not found at this
        base URL either. The service answers the same ``{"error": "not found"}`` for a missing
        job and for any path under ``/api/`` it has not, so a base URL such as
        ``http://host:8000/api/v2`` made every command "no such job" (exit 3)."""
        if self._api_checked:
            return
        probe = "tenant/"
        if asked.lstrip("/") != probe:
            try:
                answer = self._session.get(f"{self.api}{API_PREFIX}/{probe}", timeout=(10.0, self.timeout_s))
            except requests.exceptions.RequestException:
                return  # no answer says nothing about the URL: the 404 stands
            if answer.status_code != 404:
                self._api_checked = True
                return
        base = urlsplit(self.api).path
        also = "" if asked.lstrip("/") == probe else f" and for {base}{API_PREFIX}/{probe}"
        raise UsageError(
            f"{self.api} does not look like a Sharewise API: it answered 'not found' for"
            f" {base}{API_PREFIX}/{asked.lstrip('/')}{also}, which the service always has;"
            f" pass the service's base URL, probably {_likely_base(self.api)}"
        )

    # ------------------------------------------------------------------------------ endpoints

    def tenant(self, windows: str | None = None) -> dict[str, Any]:
        """The caller's tenant: ``name``, ``quotas``, ``usage`` (GPUs in use, jobs per status, its
        quota standing and GPU-hours over ``windows``, e.g. ``"2h,24h"``, the service's default
        when ``None``; docs/API.md, "Quota standing and GPU-hours over windows"). Raises
        :class:`~sharewise.errors.Rejected` for windows the service refuses."""
        return self.request("GET", "tenant/", params={"windows": windows} if windows else None)

    def submit(self, fields: Mapping[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        """Submit a job with the API's job ``fields`` (docs/API.md, "Job fields"); the job created.

        ``idempotency_key`` (default: a new UUID) is sent as ``Idempotency-Key``, so a retry after
        a lost answer returns the same job; give your own to make a script's re-runs safe too.
        Raises :class:`~sharewise.errors.Rejected` with ``fields`` for invalid input, and
        :class:`~sharewise.errors.UsageError` (nothing sent) for a value JSON cannot carry (a
        non-finite number, a date, bytes: :func:`sharewise.payload.check_fields`)."""
        check_fields(fields, "job")
        key = idempotency_key or new_idempotency_key()
        return self.request("POST", "jobs/", body=dict(fields), headers={"Idempotency-Key": key})

    def submit_many(
        self, jobs: Sequence[Mapping[str, Any]], idempotency_keys: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Submit many jobs through ``POST /api/v1/jobs/bulk/``, :data:`BULK_SIZE` per request;
        the jobs created (or, for a key used before with the same fields, found), in order.

        Each job gets its ``idempotency_keys`` entry (default: a new UUID each), so a retried
        request, or a re-run with the same keys, makes nothing twice. Each request is all or
        nothing: :class:`~sharewise.errors.Rejected` (its ``fields``: the invalid jobs of that
        request by index within it, ``{"0": {"gpus": [...]}}``) leaves the jobs of the requests
        before it submitted. Raises :class:`~sharewise.errors.UsageError` (nothing sent) when the
        keys do not match the jobs one to one or a job holds a value JSON cannot carry."""
        keys = (
            list(idempotency_keys) if idempotency_keys is not None else [new_idempotency_key() for _ in jobs]
        )
        if len(keys) != len(jobs):
            raise UsageError(f"{len(keys)} idempotency keys for {len(jobs)} jobs")
        for i, job in enumerate(jobs):
            check_fields(job, f"job {i}")
        done: list[dict[str, Any]] = []
        for start in range(0, len(jobs), BULK_SIZE):
            chunk = [
                {**jobs[i], "idempotency_key": keys[i]}
                for i in range(start, min(start + BULK_SIZE, len(jobs)))
            ]
            done.extend(self.request("POST", "jobs/bulk/", body={"jobs": chunk})["jobs"])
        return done

    def jobs(self, status: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The tenant's jobs, newest first: all of them, or the first ``limit``; only those in
        ``status`` when given (``pending``, ``running``, ``succeeded``, ``failed``, ``cancelled``)."""
        found: list[dict[str, Any]] = []
        while limit is None or len(found) < limit:
            page = PAGE if limit is None else min(PAGE, limit - len(found))
            params: dict[str, Any] = {"limit": page, "offset": len(found)}
            if status:
                params["status"] = status
            answer = self.request("GET", "jobs/", params=params)
            results = answer.get("results", []) if isinstance(answer, dict) else []
            found.extend(results)
            if not results or not answer.get("next"):
                break
        return found

    def job(self, job_id: int) -> dict[str, Any]:
        """One job: status, progress, placement (with sharing partners), pending reason."""
        return self.request("GET", f"jobs/{_id(job_id)}/")

    def cancel(self, job_id: int) -> dict[str, Any]:
        """Cancel a pending or running job (a cancelled one stays so); the job. A job that already
        succeeded or failed raises :class:`~sharewise.errors.Rejected` (409)."""
        return self.request("POST", f"jobs/{_id(job_id)}/cancel/")

    def events(self, job_id: int, limit: int | None = None) -> list[dict[str, Any]]:
        """The job's history, oldest first (``kind``, ``at``, ``message``, ``data``); the last
        ``limit`` events when given."""
        path = f"jobs/{_id(job_id)}/events/"
        if limit is not None:
            first = self.request("GET", path, params={"limit": 1})
            start = max(0, int(first.get("count", 0)) - limit)
            return list(self.request("GET", path, params={"limit": limit, "offset": start})["results"])
        found: list[dict[str, Any]] = []
        while True:
            answer = self.request("GET", path, params={"limit": PAGE, "offset": len(found)})
            found.extend(answer.get("results", []))
            if not answer.get("results") or not answer.get("next"):
                return found

    def logs(self, job_id: int, offset: int = 0, wait_s: float = 0.0) -> dict[str, Any]:
        """One piece of the job's output from character ``offset`` (negative: that many characters
        before the end): ``data``, ``offset`` (where ``data`` starts), ``next_offset``,
        ``first_offset`` (older output was dropped past the service's bound) and ``complete``
        (the job has ended and its output is all in). With ``wait_s`` > 0 the service holds the
        request until new output arrives or that many seconds pass (long poll)."""
        params = {"offset": offset, "wait": wait_s}
        return self.request(
            "GET", f"jobs/{_id(job_id)}/logs/", params=params, timeout_s=self.timeout_s + wait_s
        )

    def tail_logs(self, job_id: int, lines: int) -> tuple[str, int]:
        """The last ``lines`` whole lines of the job's output (fewer when what the service keeps
        holds fewer), and the offset just past them, from which :meth:`follow_logs` goes on."""
        # a guess of 400 characters a line (at least 4 KiB), read on to the end: one answer holds
        # at most 262,144 characters, so its last lines need not be the log's
        window = max(4096, lines * 400)
        piece = self.logs(job_id, offset=-window)
        start, first = int(piece.get("offset", 0)), int(piece.get("first_offset", 0))
        parts: list[str] = []
        while piece.get("data"):
            parts.append(piece["data"])
            piece = self.logs(job_id, offset=int(piece["next_offset"]))
        text = "".join(parts)
        # Lines longer than guessed: the first line read began before ``start`` (it is cut), so
        # go back further, twice as far each time, until it is not among the last ``lines`` or
        # the oldest character kept is reached.
        while start > first and len(text.splitlines()) <= lines:
            window *= 2
            earlier, start, first = self._read_between(job_id, max(0, start - window), start)
            text = earlier + text
        return "".join(text.splitlines(keepends=True)[-lines:]), int(piece.get("next_offset", 0))

    def _read_between(self, job_id: int, begin: int, stop: int) -> tuple[str, int, int]:
        """The job's output from character ``begin`` up to ``stop`` (both absolute), with where it
        starts (later than ``begin`` when older output was dropped) and the oldest character
        kept. When all of it was dropped meanwhile: ``""`` starting at ``stop``, kept from there."""
        piece = self.logs(job_id, offset=begin)
        start, first = int(piece.get("offset", begin)), int(piece.get("first_offset", 0))
        if start >= stop:
            return "", stop, stop
        parts: list[str] = []
        at = start
        while at < stop and piece.get("data"):
            parts.append(piece["data"][: stop - at])
            at += len(parts[-1])
            if at < stop:
                piece = self.logs(job_id, offset=int(piece["next_offset"]))
        return "".join(parts), start, first

    def follow_logs(self, job_id: int, offset: int = 0, wait_s: float = LOG_WAIT_S) -> Iterator[str]:
        """The job's output as it comes (pieces of text), from ``offset``, until the job has ended
        and its output is complete; a gap (output dropped past the service's bound) is yielded as
        a line ``[... N characters dropped ...]``."""
        while True:
            piece = self.logs(job_id, offset, wait_s)
            start = int(piece.get("offset", offset))
            if offset >= 0 and start > offset:
                yield f"[... {start - offset} characters dropped ...]\n"
            if piece.get("data"):
                yield piece["data"]
            offset = int(piece.get("next_offset", start))
            if piece.get("complete") and not piece.get("data"):
                return

    def wait(self, job_id: int, interval_s: float = 2.0, timeout_s: float | None = None) -> dict[str, Any]:
        """Poll the job every ``interval_s`` seconds until it ends (or ``timeout_s`` passes); the
        job as last seen."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job.get("status") in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                return job
            time.sleep(interval_s)


def _id(job_id: Any) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 0:
        raise UsageError(f"a job id is a non-negative integer, got {job_id!r}")
    return job_id


def _likely_base(api: str) -> str:
    """The service's base URL that ``api`` probably meant: what comes before a path segment
    ``api`` (``http://host:8000/api/v2`` -> ``http://host:8000``), else the bare origin."""
    parts = urlsplit(api)
    segments = parts.path.split("/")
    path = "/".join(segments[: segments.index("api")]) if "api" in segments else ""
    return f"{parts.scheme}://{parts.netloc}{path}"


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 error, in a few words ("connection refused")."""
    texts = []
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        texts.append(str(current))
        todo.extend(a for a in current.args if isinstance(a, BaseException))
        # an ssl.SSLError's ``reason`` is a string ("WRONG_VERSION_NUMBER"), urllib3's an error
        todo.extend(
            e
            for e in (getattr(current, "reason", None), current.__cause__, current.__context__)
            if isinstance(e, BaseException)
        )
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if any(marker in t for t in texts):
            return marker.lower()
    return texts[-1].split(": ", 1)[-1][:200]


def _tls_failure(api: str, exc: BaseException) -> str:
    """A few words for a failed TLS connection to ``api``: an untrusted certificate as it is; any
    other failure of the handshake most likely because the server speaks plain HTTP there (an
    ``https://`` URL of an ``http://`` service), which the words suggest."""
    cause = _root_cause(exc)
    if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "certificate verify failed" in cause:
        return cause
    where = urlsplit(api).netloc
    return f"could not speak TLS to {where}; is it http://{api.split('://', 1)[-1]}?"


def _retry_after_s(response: requests.Response) -> float | None:
    header = response.headers.get("Retry-After")
    try:
        return max(0.0, float(header)) if header is not None else None
    except ValueError:
        return None


#: The ``code`` of the service's 400 for a Host header its ``ALLOWED_HOSTS`` does not admit.
DISALLOWED_HOST = "disallowed_host"


def _decode(response: requests.Response, api: str) -> Any:
    """The JSON body of ``response`` from the service at ``api``, or the error it means."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text[:200]
        if response.status_code < 400:
            raise ServiceError(
                f"{response.url} answered {response.status_code} with a body that is not JSON",
                response.status_code,
            ) from None
    if response.status_code >= 500:
        message = body.get("error") if isinstance(body, dict) else None
        raise ServiceError(
            f"the service failed (HTTP {response.status_code}){': ' + message if message else ''}",
            response.status_code,
        )
    if response.status_code == 404 and not is_error_body(body):
        # The service answers every 404 under /api/ with its JSON error, so a page without one
        # comes from something else: exit 3 ("no such job") would mislead a script.
        raise UsageError(
            f"{api} answered HTTP 404 with no Sharewise error body (for {urlsplit(response.url).path}):"
            " it is probably not the service's base URL, which is like http://host:8000"
        )
    if response.status_code == 400 and isinstance(body, dict) and body.get("code") == DISALLOWED_HOST:
        # The service refused the URL's host name before reading the request: the URL is at fault,
        # not the command (exit 2, as for any API URL that is not the service's).
        raise UsageError(f"{api} refused the host name of this URL: {body.get('error')}")
    if response.status_code == 400 and not is_error_body(body):
        # Every 400 of the service is its JSON error; a bare page (an older service's refusal of
        # a host ALLOWED_HOSTS does not admit, or another server) says the URL is wrong.
        raise UsageError(
            f"{api} answered HTTP 400 with no Sharewise error body (for {urlsplit(response.url).path}):"
            " it is probably not the service's base URL, or the service does not admit this host name"
            " (its ALLOWED_HOSTS setting)"
        )
    if response.status_code >= 400:
        raise error_for(response.status_code, body)
    return body


__all__ = ["ACTIVE", "TERMINAL", "Client", "new_idempotency_key"]
