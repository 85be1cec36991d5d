"""A Celery worker for the integration tests: ``python -m tests.integration.worker``.

Consumes the round queue (``scheduler``, and ``celery`` while no route is configured) with one
process (``--pool solo``). With ``SHAREWISE_TEST_PAUSE_FILE`` set, every round stops after it has
written its placements but before its transaction commits: it writes that file and sleeps, so a
test can kill the worker mid-round. ``SHAREWISE_TEST_VISIBILITY_S`` shortens Redis' visibility
timeout, so this worker soon redelivers a message whose worker died before acknowledging it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from config.celery import app
    from scheduling import services

    visibility = os.environ.get("SHAREWISE_TEST_VISIBILITY_S")
    if visibility:
        # Redis redelivers a message not acknowledged within this many seconds (the kill test).
        app.conf.broker_transport_options = {"visibility_timeout": float(visibility)}
    pause_file = os.environ.get("SHAREWISE_TEST_PAUSE_FILE")
    if pause_file:
        persist = services._persist

        def persist_then_pause(*args: Any, **kwargs: Any) -> Any:
            plan = persist(*args, **kwargs)
            Path(pause_file).write_text("persisted, not committed\n")
            time.sleep(600)
            return plan

        services._persist = persist_then_pause
    app.worker_main(["worker", "--pool", "solo", "--queues", "scheduler,celery", "--loglevel", "WARNING",
                     "--without-mingle", "--without-gossip", "--without-heartbeat"])


if __name__ == "__main__":
    main()
