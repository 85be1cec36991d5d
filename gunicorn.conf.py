"""gunicorn's settings beside the command line (gunicorn reads ``./gunicorn.conf.py`` from the
directory it starts in: the repository root in the Procfile and in the image).

Two hooks. Before any worker starts, the master loads Django's settings, so a bad setting prints
one line and the server exits 2 (config/startup.py) instead of every worker failing with a
traceback. Once a worker has loaded Django, its start-up objects (modules, settings, URL
patterns, models: some hundred thousand) are frozen out of the garbage collector's sight
(``gc.freeze``), so a full collection no longer walks them all: without it one request in a few
dozen paid a 20-50 ms pause (``python benchmarks/bench_dashboard.py --gc-freeze``,
docs/PERFORMANCE.md "Dashboard").
"""

from __future__ import annotations

import gc
from typing import Any


def post_worker_init(worker: Any) -> None:
    """Freeze what the worker holds after loading the application (gunicorn server hook)."""
    gc.collect()
    gc.freeze()


def on_starting(server: Any) -> None:
    """Load the settings in the master before any worker (gunicorn server hook); a bad setting
    exits 2 with one line."""
    from config.startup import load_settings_or_exit

    load_settings_or_exit()
