"""Servers no client should wait on or read to the end: one answers a byte at a time, slowly (it
never lets a per-read timeout expire, so only an overall deadline ends a request to it), one
answers without end."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

PORTS = range(27200, 27300)
"""The ports these tests may listen on."""
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n" + (
    b"#" * 100_000)


@contextmanager
def dripping_server(every: float) -> Iterator[int]:
    """A listening port on 127.0.0.1 whose every connection gets :data:`ANSWER` a byte each
    ``every`` seconds; stopped (every connection closed) on the way out."""

    def drip(conn: socket.socket, stopped: threading.Event) -> None:
        for byte in ANSWER:
            if stopped.wait(every):
                return
            conn.sendall(bytes([byte]))

    with _serving(drip) as port:
        yield port


@contextmanager
def endless_server() -> Iterator[int]:
    """A listening port on 127.0.0.1 whose every connection gets a 200 whose body never ends
    (comment lines, as fast as the client reads), until the client hangs up."""

    def flood(conn: socket.socket, stopped: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        line = b"# more\n" * 8192
        while not stopped.is_set():
            conn.sendall(line)

    with _serving(flood) as port:
        yield port


@contextmanager
def _serving(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A port whose every connection, once its request is in, gets ``answer``; stopped (every
    connection closed) on the way out."""
    listener = _listen()
    stopped = threading.Event()
    connections: list[socket.socket] = []

    def serve(conn: socket.socket) -> None:
        with suppress(OSError):  # the client hung up, or the server is stopping
            conn.recv(65536)  # the request: whatever it says, the answer is the same
            answer(conn, stopped)

    def accept() -> None:
        while not stopped.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener closed: stopped
            connections.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopped.set()
        listener.close()
        for conn in connections:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


def _listen() -> socket.socket:
    for port in PORTS:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen()
        return sock
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")
