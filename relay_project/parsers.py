"""The REST APIs' JSON parser (every DRF view of the project: registry, teams, tasks), named
by the REST_FRAMEWORK setting: DRF's, behind a bound on how deep the body nests (counted as
the A2A request limits count it). Here, with the settings that name it, since every app's API
uses it."""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from tasks_app.protocol.limits import raw_depth


class BoundedJSONParser(JSONParser):
    """Refuses a body nested deeper than RELAY_MAX_JSON_DEPTH with a 400 before DRF's parser,
    which recurses, reads it (a body a hundred thousand levels deep made it fail with a 500)."""

    def parse(self, stream, media_type=None, parser_context=None):
        body = stream.read() if stream is not None else b""
        limit = settings.RELAY_MAX_JSON_DEPTH
        if limit and raw_depth(body) > limit:
            raise ParseError(
                f"the request body is nested deeper than the limit of {limit} "
                "levels (RELAY_MAX_JSON_DEPTH)"
            )
        return super().parse(io.BytesIO(body), media_type, parser_context)
