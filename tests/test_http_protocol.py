"""The production server's header deadline (``relay_project.http_protocol``), on a real uvicorn
on 127.0.0.1: a client that sends its headers a byte at a time (slowloris) is cut off."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest
import uvicorn

from relay_project.http_protocol import HeaderTimeoutProtocol


async def hello(scope, receive, send):
    if scope["type"] != "http":
        return
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


@contextmanager
def server(protocol):
    """uvicorn serving ``hello`` with ``protocol``; yields its port."""
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(
        hello, http=protocol, lifespan="off", log_level="warning", timeout_keep_alive=2
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not running.started:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        running.should_exit = True
        thread.join(10)
        sock.close()


def seconds_until_closed(connection: socket.socket, text: bytes, every: float = 0.2) -> float:
    """Sends ``text`` a byte each ``every`` seconds; how long until the server hung up."""
    started = time.monotonic()
    connection.settimeout(every)
    for byte in text:
        try:
            connection.sendall(bytes([byte]))
            if connection.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
    raise AssertionError(f"still open after {time.monotonic() - started:.1f} s")


def answer(connection: socket.socket) -> bytes:
    received = b""
    while not received.endswith(b"hello"):
        chunk = connection.recv(1024)
        assert chunk, received
        received += chunk
    return received


SLOW_HEADERS = b"GET / HTTP/1.1\r\nHost: relay\r\nX-Slow: " + b"a" * 40


@pytest.fixture
def one_second(settings):
    settings.RELAY_HEADER_TIMEOUT_SECONDS = 1


def test_a_connection_sending_its_headers_a_byte_at_a_time_is_closed_within_the_timeout(
    one_second,
):
    with server(HeaderTimeoutProtocol) as port, socket.create_connection(("127.0.0.1", port)) as c:
        took = seconds_until_closed(c, SLOW_HEADERS)
    assert 0.8 < took < 2.0


def test_a_kept_alive_connection_sending_its_next_headers_slowly_is_closed_too(one_second):
    with server(HeaderTimeoutProtocol) as port, socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
        assert answer(c).startswith(b"HTTP/1.1 200")
        time.sleep(1.2)  # longer than the header timeout, shorter than keep-alive's 2 s
        took = seconds_until_closed(c, SLOW_HEADERS)
    assert 0.8 < took < 2.0


def test_requests_sent_at_once_are_answered_as_before(one_second):
    with server(HeaderTimeoutProtocol) as port, socket.create_connection(("127.0.0.1", port)) as c:
        for _ in range(3):
            c.sendall(b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
            assert answer(c).startswith(b"HTTP/1.1 200")
            time.sleep(0.6)  # the three together take longer than the header timeout


def test_a_new_connection_that_sends_nothing_is_closed_after_the_keep_alive_timeout(one_second):
    with server(HeaderTimeoutProtocol) as port, socket.create_connection(("127.0.0.1", port)) as c:
        started = time.monotonic()
        c.settimeout(5)
        assert c.recv(1024) == b""
        took = time.monotonic() - started
    assert 1.8 < took < 3.0
