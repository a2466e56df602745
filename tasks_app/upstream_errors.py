"""The error of a call that did not reach its agent or got no usable answer, shared by the
HTTP bindings (``tasks_app.upstream``) and gRPC (``tasks_app.grpc.upstream``)."""

from __future__ import annotations


class UpstreamError(Exception):
    """The agent could not be reached or did not answer usably. ``category`` is stable."""

    def __init__(self, category: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.category = category
        self.message = message
        self.status = status
