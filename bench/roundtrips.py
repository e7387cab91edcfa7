"""Round trips to PostgreSQL, counted on the wire: a TCP relay between the client and the server.

A round trip is the client waiting for the server: here, each time the server starts
to send after the client sent something (bytes the client sends while the server's
answer streams in do not end the trip; a pipeline's queries, its Sync and the COMMIT
sent together and answered together count once). Point a connection URL at
:attr:`RoundTrips.url` and read :attr:`RoundTrips.trips` before and after the work.

    with RoundTrips(url) as wire:
        engine = sa.create_engine(wire.url)
        ...
        before = wire.trips
        work()
        print(wire.trips - before)
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import sqlalchemy as sa


class RoundTrips:
    """A relay on a loopback port to the server ``url`` names, counting round trips."""

    def __init__(self, url: str) -> None:
        self._target = sa.make_url(url)
        self._lock = threading.Lock()
        self._trips = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        self.url = self._target.set(host="127.0.0.1", port=self._port).render_as_string(hide_password=False)
        """``url`` with its host and port replaced by the relay's."""
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def trips(self) -> int:
        with self._lock:
            return self._trips

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection((self._target.host or "127.0.0.1", self._target.port or 5432))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, server]
            last: list[str] = ["server"]  # who spoke last on this connection
            threading.Thread(target=self._pump, args=(client, server, "client", last), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "server", last), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, side: str, last: list[str]) -> None:
        try:
            while data := src.recv(1 << 16):
                # Noted before it is passed on: the answer cannot overtake its question.
                with self._lock:
                    if side == "server" and last[0] == "client":
                        self._trips += 1
                    last[0] = side
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._listener.close()
            for s in self._sockets:
                s.close()

    def __enter__(self) -> RoundTrips:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
