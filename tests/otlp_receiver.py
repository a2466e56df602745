"""A local OTLP/HTTP trace receiver for tests: a real HTTP server on 127.0.0.1 that accepts
``POST /v1/traces`` (protobuf) and keeps the spans, decoded with opentelemetry-proto."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start: int
    attributes: dict[str, Any] = field(default_factory=dict)
    end: int = 0
    status: int = 0
    """The span's status code: 0 unset, 1 OK, 2 ERROR."""


def _value(any_value) -> Any:
    which = any_value.WhichOneof("value")
    return getattr(any_value, which) if which else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.posts = 0
        self._lock = threading.Lock()

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self._lock:
            self.posts += 1
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            ReceivedSpan(
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                name=span.name,
                                kind=span.kind,
                                start=span.start_time_unix_nano,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                end=span.end_time_unix_nano,
                                status=span.status.code,
                            )
                        )

    def wait_for(self, predicate, seconds: float = 10.0) -> list[ReceivedSpan]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            time.sleep(0.05)
        raise AssertionError(f"the spans never matched: {[s.name for s in self.spans]}")


@contextlib.contextmanager
def otlp_receiver():
    """Yields (receiver, the traces URL)."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the http.server spelling)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            receiver.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_port}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def tracing_to_receiver(monkeypatch):
    """Tracing on in this process, exporting to a fresh receiver (yielded), off again after."""
    from relay_project import tracing

    with otlp_receiver() as (receiver, url):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        assert tracing.configure()
        try:
            yield receiver
        finally:
            tracing.shutdown()
