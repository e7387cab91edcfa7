"""Receivers of the notifier's tests, on 127.0.0.1 only: a threaded HTTP server that
records every request and answers as the test says (a status per call, or holding a
request until released), one that answers a byte at a time (:func:`trickling_receiver`),
and helpers to write configs and secrets."""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SECRET = "whsec_" + base64.b64encode(b"symfonic-notify-test-secret-32b!").decode()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """What the server got and how it answers (``answer(request) -> status``)."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    answer: Callable[[Received], int] = lambda request: 200
    in_flight: int = 0
    most_in_flight: int = 0
    hold: threading.Event | None = None
    """While set to an unset Event, each request waits on it (released by ``set()``)."""
    arrived: threading.Condition = field(default_factory=threading.Condition)
    location: str | None = None

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Block until ``count`` requests arrived (they may still be held)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"{len(self.requests)} request(s) arrived, {count} awaited")
            return list(self.requests)

    def delivered(self) -> list[Received]:
        """The requests answered 2xx."""
        return [r for r in self.requests if getattr(r, "status", 0) // 100 == 2]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
            with receiver.arrived:
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                receiver.requests.append(got)
                receiver.arrived.notify_all()
            try:
                if receiver.hold is not None:
                    receiver.hold.wait(60)
                status = receiver.answer(got)
                got.status = status  # type: ignore[attr-defined]
                self.send_response(status)
                if 300 <= status < 400 and receiver.location:
                    self.send_header("location", receiver.location)
                self.send_header("content-length", "0")
                self.end_headers()
            finally:
                with receiver.arrived:
                    receiver.in_flight -= 1

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def http_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        if receiver.hold is not None:
            receiver.hold.set()
        server.shutdown()
        server.server_close()


def write_secret(folder: Path) -> Path:
    path = folder / "hook.secret"
    path.write_text(SECRET + "\n", encoding="utf-8")
    os.chmod(path, 0o600)
    return path


def hook_config(folder: Path, url: str, *, name: str = "erp", **extra: Any) -> dict[str, Any]:
    """A config with one webhook subscription to ``url`` (``extra``: more of its keys)."""
    return {"subscriptions": [{"name": name, "events": ["*"],
                               "webhook": {"url": url, "secret_file": str(write_secret(folder))}, **extra}]}


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / "notify.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@dataclass
class Trickler:
    """A receiver that answers ``HTTP/1.1 200 OK`` and then a header one byte at a time,
    a byte every ``pace`` seconds, at most ``most`` of them (then it
    closes the connection itself); ``release`` makes it finish a 200 at once."""

    url: str = ""
    trickling: threading.Event = field(default_factory=threading.Event)
    """Set when a request has been read and the trickle begun."""
    closed_by_client: threading.Event = field(default_factory=threading.Event)
    """Set when the client closed a connection in the middle of a trickle."""
    ran_out: threading.Event = field(default_factory=threading.Event)
    """Set when a trickle reached ``most`` bytes with the client still there."""
    release: threading.Event = field(default_factory=threading.Event)
    bodies: list[bytes] = field(default_factory=list)
    at_once: dict[bytes, int] = field(default_factory=dict)
    """Requests being answered now, by body (one event's body is the same on every send)."""
    most_at_once: int = 0
    """The most requests with one body answered at the same time."""
    counting: threading.Lock = field(default_factory=threading.Lock)


def _read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return body


@contextmanager
def trickling_receiver(pace: float = 0.2, most: int = 200) -> Iterator[Trickler]:
    trickler = Trickler()
    listener = socket.create_server(("127.0.0.1", 0))
    trickler.url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    done = threading.Event()

    def trickle(conn: socket.socket) -> None:
        counted: bytes | None = None
        with conn:
            try:
                body = _read_request(conn)
                if body is None:
                    return
                with trickler.counting:
                    trickler.bodies.append(body)
                    trickler.at_once[body] = trickler.at_once.get(body, 0) + 1
                    trickler.most_at_once = max(trickler.most_at_once, trickler.at_once[body])
                counted = body
                trickler.trickling.set()
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(most):
                    if trickler.release.is_set() or done.is_set():
                        conn.sendall(b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        return
                    conn.sendall(b"a")
                    # sleep-ok: the trickle's pace; a close by the client ends the wait at once
                    readable, _, _ = select.select([conn], [], [], pace)
                    if readable and not conn.recv(1):
                        trickler.closed_by_client.set()
                        return
                trickler.ran_out.set()
            except OSError:
                trickler.closed_by_client.set()
            finally:
                if counted is not None:
                    with trickler.counting:
                        trickler.at_once[counted] -= 1

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield trickler
    finally:
        done.set()
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        listener.close()
