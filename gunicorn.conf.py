"""gunicorn's settings beside the command line (gunicorn reads ``./gunicorn.conf.py`` from the
directory it starts in: the repository root in the Procfile and in the image).

Three hooks. Before any worker starts, the master loads Django's settings, so a bad setting
prints one line and the server exits 2 (config/startup.py) instead of every worker failing with a
traceback. Once a worker has loaded Django, its start-up objects (modules, settings, URL
patterns, models: some hundred thousand) are frozen out of the garbage collector's sight
(``gc.freeze``), so a full collection no longer walks them all: without it one request in a few
dozen paid a 20-50 ms pause (``python benchmarks/bench_dashboard.py --gc-freeze``,
docs/PERFORMANCE.md "Dashboard"). And the worker's full collections run after a response was
written rather than inside a request (config/web_gc.py, ``--gc-between-requests`` there).
"""

from __future__ import annotations

from typing import Any

# the project's modules are imported when a hook runs, not when gunicorn reads this file: the
# ``config`` package loads the Celery app, which the master has no use for before on_starting


def post_worker_init(worker: Any) -> None:
    """Freeze what the worker holds after loading the application, and stop automatic full
    collections (gunicorn server hook; :func:`config.web_gc.after_start`)."""
    from config import web_gc

    web_gc.after_start()


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    """After each response was written: a full collection when one is due (gunicorn server hook;
    :func:`config.web_gc.collect_between_requests`)."""
    from config import web_gc

    web_gc.collect_between_requests()


def on_starting(server: Any) -> None:
    """Load the settings in the master before any worker (gunicorn server hook); a bad setting
    exits 2 with one line."""
    from config.startup import load_settings_or_exit

    load_settings_or_exit()
