"""uvicorn's HTTP protocol with a deadline for each request's headers.

uvicorn bounds an idle kept-alive connection (``--timeout-keep-alive``) but not a request whose
headers arrive slowly: a client sending a byte a second holds its connection, and a thousand
such clients hold a thousand (slowloris); nor a new connection that sends nothing. This
protocol closes a connection whose request line and headers are not complete
``RELAY_HEADER_TIMEOUT_SECONDS`` after the request's first byte, and a new connection silent
for the keep-alive timeout, as uvicorn closes one silent after a response. Bodies and responses
are not bounded here: a stream may last as long as its task.

Use it with ``uvicorn --http relay_project.http_protocol:HeaderTimeoutProtocol``. It extends
the httptools protocol, uvicorn's own choice when httptools is installed (uvicorn[standard]).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that closes a connection whose headers come too slowly."""

    def __init__(self, *args, **kwargs) -> None:
        from django.conf import settings

        super().__init__(*args, **kwargs)
        self.header_timeout = settings.RELAY_HEADER_TIMEOUT_SECONDS
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._close_in(self.timeout_keep_alive)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._close_in(self.header_timeout)

    def on_headers_complete(self) -> None:
        self._cancel_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        super().connection_lost(exc)

    def _close_in(self, seconds: float) -> None:
        self._cancel_timer()
        self._timer = self.loop.call_later(seconds, self._too_slow)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.transport.close()
