"""The demo's web server: Django's WSGI server with a fixed pool of worker threads that keep
their database connections between requests.

Why not Django's ``ThreadedWSGIServer``: it starts a thread per request and closes every
database connection after each one, so each request opens a new connection (on SQLite: a file
open and the WAL pragma). The embedded demo spent 60 % of its samples there (issue 16). Here a
worker thread's connection lives as long as ``CONN_MAX_AGE`` allows (Django's
``close_old_connections`` at the end of every request decides, as under gunicorn), and each
worker closes its own when the server stops.
"""

from __future__ import annotations

import queue
import socket
import threading
from typing import Any

from django.core.servers.basehttp import WSGIServer
from django.db import connections

from demo.shutdown import join_within

#: Worker threads of the demo's web server **(ours)**: the in-process agents, the replay and a
#: browser on the dashboard send at most this many requests at once without waiting.
WORKERS = 16


class PooledWSGIServer(WSGIServer):
    """A WSGI server whose requests are handled by ``workers`` long-lived threads (a queue in
    front of them). Call :meth:`server_close` after ``shutdown()``: it stops the workers, which
    close their database connections. Raises ``ValueError`` for ``workers`` < 1 and ``OSError``
    when the address is taken."""

    #: Listen backlog: Django's 10 is full when the fleet's agents connect at once, and a
    #: connection refused that way is retried by the client's TCP only after a second.
    request_queue_size = 128

    def __init__(self, *args: Any, workers: int = WORKERS, **kwargs: Any) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._requests: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        # no worker yet while the socket binds: a taken address makes TCPServer call server_close
        # before raising, and that must find no worker to stop (it found none at all: an
        # AttributeError hid the OSError, and the demo ended in a traceback)
        self._workers: list[threading.Thread] = []
        super().__init__(*args, **kwargs)
        self._workers = [
            threading.Thread(target=self._work, name=f"demo-web-{i}", daemon=True) for i in range(workers)
        ]
        for worker in self._workers:
            worker.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the accepted connection for a worker (the accepting thread goes back at once)."""
        self._requests.put((request, client_address))

    def _work(self) -> None:
        try:
            while (item := self._requests.get()) is not None:
                request, client_address = item
                try:
                    self.finish_request(request, client_address)
                except Exception:
                    self.handle_error(request, client_address)
                finally:
                    self.shutdown_request(request)
        finally:
            connections.close_all()  # this worker's own connections

    def server_close(self) -> None:
        """Close the listening socket, then stop the workers once the requests queued before
        are handled (each closes its database connections; waits at most 5 s for all of them)."""
        super().server_close()
        for _ in self._workers:
            self._requests.put(None)
        join_within(self._workers, 5.0)
