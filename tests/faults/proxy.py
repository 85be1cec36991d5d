"""A TCP proxy on loopback in front of Redis, so that a fault can cut the broker and cache off
from every process of the deployment (a network outage) without touching the Redis server, which
other users may share."""

from __future__ import annotations

import contextlib
import socket
import threading

#: Bytes read per ``recv`` while pumping a connection.
CHUNK = 65536


class CuttableProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``. :meth:`cut` drops every connection and refuses
    new ones (connection refused) until :meth:`restore`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.sockets: set[socket.socket] = set()
        self.listener: socket.socket | None = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.restore()

    @property
    def up(self) -> bool:
        return self.listener is not None

    def restore(self) -> None:
        """Listen again (no-op when up)."""
        with self.lock:
            if self.listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
            self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close the listener and every open connection, both ways."""
        with self.lock:
            listener, self.listener = self.listener, None
            open_sockets, self.sockets = self.sockets, set()
        for sock in [listener, *open_sockets]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                if self.listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self.sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with self.lock:
                    self.sockets.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()
