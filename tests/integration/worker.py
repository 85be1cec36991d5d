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

#: Seconds between this worker's scans for unacknowledged messages older than the visibility
#: timeout (with ``SHAREWISE_TEST_VISIBILITY_S``). Kombu's defaults scan on the first check and then
#: only every 10th check of 10 s each (about 100 s): a scan that came before the dead worker's
#: message was old enough would leave it undelivered for 100 s.
RESTORE_INTERVAL_S = 1


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from config.celery import app
    from scheduling.service import rounds

    visibility = os.environ.get("SHAREWISE_TEST_VISIBILITY_S")
    if visibility:
        # Redis redelivers a message not acknowledged within this many seconds (the kill test),
        # checked every RESTORE_INTERVAL_S for as long as the worker runs.
        app.conf.broker_transport_options = {
            "visibility_timeout": float(visibility),
            "unacked_restore_interval": RESTORE_INTERVAL_S,
            "unacked_restore_throttle": 1,
        }
    pause_file = os.environ.get("SHAREWISE_TEST_PAUSE_FILE")
    if pause_file:
        persist = rounds.persist_round

        def persist_then_pause(*args: Any, **kwargs: Any) -> Any:
            plan = persist(*args, **kwargs)
            Path(pause_file).write_text("persisted, not committed\n")
            time.sleep(600)
            return plan

        rounds.persist_round = persist_then_pause
    app.worker_main(
        [
            "worker",
            "--pool",
            "solo",
            "--queues",
            "scheduler,celery",
            "--loglevel",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ]
    )


if __name__ == "__main__":
    main()
