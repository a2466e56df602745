"""Tiny HTTP servers that publish agent cards (or fail to), for registry tests on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable
from contextlib import contextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from routing.demo.serve import serve

Handler = Callable[[Request], Response]


def card_json(card: dict) -> Handler:
    return lambda request: JSONResponse(card)


def status(code: int, body: str = "") -> Handler:
    return lambda request: Response(body, status_code=code)


def redirect(location: str) -> Handler:
    return lambda request: RedirectResponse(location, status_code=302)


def hang(seconds: float = 30) -> Handler:
    async def handler(request: Request) -> Response:
        await asyncio.sleep(seconds)
        return Response("late")

    return handler


class CardSite:
    """A site whose paths answer as configured; ``hits`` records every path requested."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = dict(routes)
        self.hits: list[str] = []
        self.headers: list[dict[str, str]] = []

    async def __call__(self, scope, receive, send):
        app = Starlette(routes=[Route("/{path:path}", self._dispatch)])
        await app(scope, receive, send)

    async def _dispatch(self, request: Request) -> Response:
        path = request.url.path
        self.hits.append(path)
        self.headers.append(dict(request.headers))
        handler = self.routes.get(path)
        if handler is None:
            return Response("not found", status_code=404)
        result = handler(request)
        return await result if asyncio.iscoroutine(result) else result


@contextmanager
def card_site(routes: dict[str, Handler], host: str = "127.0.0.1", port: int = 0):
    """Serves a CardSite on ``host`` (and ``port``, 0 for any) and yields (site, base_url)."""
    site = CardSite(routes)
    with serve(site, host=host, port=port) as server:
        yield site, server.url


def oversized_card(card: dict, size: int) -> Handler:
    padded = dict(card, description="x" * size)
    body = json.dumps(padded)
    return lambda request: Response(body, media_type="application/json")


@contextmanager
def trickling_server(response: bytes, *, every: float = 0.2):
    """A raw HTTP server on 127.0.0.1 that answers every connection with ``response`` one byte
    each ``every`` seconds (a slow-read attack on the relay's fetches); yields its base URL.
    Each connection's sender stops when the client hangs up or the server closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stopped = threading.Event()

    def trickle(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            for byte in response:
                if stopped.wait(every):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return

    def accept() -> None:
        while not stopped.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=trickle, args=(connection,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopped.set()
        acceptor.join()
        listener.close()
