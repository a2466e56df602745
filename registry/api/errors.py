"""One place that turns errors into the registry API's JSON error body:

{"error": {"code": "invalid_card", "message": "...", ...details}}
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from registry.selectors import InvalidQueryError
from registry.services import RegistryError
from relay_project import database
from relay_project.redis_clients import UNREACHABLE, UNREACHABLE_MESSAGE

logger = logging.getLogger(__name__)


def error_response(code: str, message: str, http_status: int, **details) -> Response:
    return Response({"error": {"code": code, "message": message, **details}}, status=http_status)


def _first_message(detail) -> str:
    if isinstance(detail, dict):
        field, value = next(iter(detail.items()))
        return f"{field}: {_first_message(value)}"
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


def exception_handler(exc, context):
    if isinstance(exc, RegistryError):
        details = {"missing": list(exc.missing)} if exc.missing else {}
        return error_response(exc.code, exc.message, exc.status, **details)
    if isinstance(exc, InvalidQueryError):
        return error_response("invalid_query", str(exc), status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, (*UNREACHABLE, *database.UNAVAILABLE)):
        # Redis (the API key lookup, the rate limits) or the database is away: a short
        # outage, not a bug. The client may send the same request again.
        message = (
            UNREACHABLE_MESSAGE if isinstance(exc, UNREACHABLE) else database.UNAVAILABLE_MESSAGE
        )
        request = context.get("request")
        where = f"{request.method} {request.path}" if request is not None else "an API call"
        logger.warning("refused %s: %s (%s)", where, message, exc)
        response = error_response("unavailable", message, status.HTTP_503_SERVICE_UNAVAILABLE)
        response["Retry-After"] = str(database.RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, RequestDataTooBig):
        return error_response(
            "too_large",
            f"the request body is larger than the limit of "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        code, message, details = (
            "invalid_request",
            _first_message(exc.detail),
            {"fields": exc.detail},
        )
    elif isinstance(exc, exceptions.ParseError):
        code, message, details = "invalid_json", str(exc.detail), {}
    else:
        code = exc.default_code if isinstance(exc, exceptions.APIException) else "error"
        # Django's Http404 may carry no text (DRF raises it for an unknown ?format=).
        message = str(getattr(exc, "detail", exc)) or response.status_text.lower()
        details = {}
    response.data = {"error": {"code": code, "message": message, **details}}
    return response
