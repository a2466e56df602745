"""The error of a call that did not reach its agent or got no usable answer, shared by the
HTTP bindings (``tasks_app.upstream``) and gRPC (``tasks_app.grpc.upstream``)."""

from __future__ import annotations


class UpstreamError(Exception):
    """The agent could not be reached or did not answer usably. ``category`` is stable;
    ``status`` is the HTTP status of an answer without an A2A body, and ``retry_after`` the
    seconds its Retry-After header asked for (None without one)."""

    def __init__(
        self,
        category: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.category = category
        self.message = message
        self.status = status
        self.retry_after = retry_after
