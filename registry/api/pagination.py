"""Cursor pagination of the registry's lists: DRF's ``CursorPagination`` ordered by id, with the
answer shape and cursors this API has always had.

DRF's own answer is ``{"next": <url>, "previous": <url>, "results": [...]}`` with an encoded
offset/position cursor; ours is ``{"agents": [...], "nextCursor": <token>|null}`` (``teams`` for
the team list), the token being the last id of the page in base64url, and a bad ``limit`` or
``cursor`` is a 400 rather than a silent default. The subclass keeps that shape so clients and
cursors given out before keep working; DRF still does the paging and the schema parameters.
"""

from __future__ import annotations

from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.response import Response

from registry import selectors
from registry.filters import InvalidQueryError


class IdCursorPagination(CursorPagination):
    ordering = "id"
    page_size = selectors.DEFAULT_PAGE_SIZE
    max_page_size = selectors.MAX_PAGE_SIZE
    page_size_query_param = "limit"
    page_size_query_description = (
        f"Page size, 1 to {selectors.MAX_PAGE_SIZE} (default {selectors.DEFAULT_PAGE_SIZE})"
    )
    cursor_query_description = "nextCursor of the previous page"
    template = None
    items_key = "items"
    """The answer's key for the page's items."""
    example_id = "weather"
    """The id of the last item of the example page (for the API docs)."""

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw in (None, ""):
            return self.page_size
        try:
            size = int(raw)
        except ValueError as error:
            raise InvalidQueryError(
                f"{self.page_size_query_param} must be a whole number"
            ) from error
        if not 1 <= size <= self.max_page_size:
            raise InvalidQueryError(
                f"{self.page_size_query_param} must be between 1 and {self.max_page_size}"
            )
        return size

    def decode_cursor(self, request) -> Cursor | None:
        token = request.query_params.get(self.cursor_query_param)
        if not token:
            return None
        return Cursor(offset=0, reverse=False, position=selectors.decode_cursor(token))

    def encode_cursor(self, cursor: Cursor) -> str:
        # Ids are unique, so a next cursor is always a position with no offset and no reverse:
        # the bare id is enough, and is the token this API gave out before.
        return selectors.encode_cursor(cursor.position)

    def get_paginated_response(self, data) -> Response:
        return Response({self.items_key: data, "nextCursor": self.get_next_link()})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": [self.items_key, "nextCursor"],
            "properties": {
                self.items_key: schema,
                "nextCursor": {
                    "type": "string",
                    "nullable": True,
                    "description": "Pass as cursor for the next page; null on the last page.",
                    "example": selectors.encode_cursor(self.example_id),
                },
            },
        }


class AgentPagination(IdCursorPagination):
    items_key = "agents"


class TeamPagination(IdCursorPagination):
    items_key = "teams"
    example_id = "crew"
