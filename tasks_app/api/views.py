"""A2A endpoints over HTTP: JSON-RPC at a target's base URL and HTTP+JSON under it.

Async DRF views (adrf), so a call waiting on an upstream agent holds no thread. They parse with
``calls``, run the gateway, and render in the caller's binding and version. Streaming calls
never reach these views: the ASGI router sends them to ``tasks_app.consumers``.
"""

from __future__ import annotations

import logging

from adrf.views import APIView
from asgiref.sync import sync_to_async
from django.http import HttpResponse
from rest_framework import exceptions

from registry.auth import ApiKeyAuthentication, HasApiKey
from tasks_app import gateway
from tasks_app.api import calls
from tasks_app.api.calls import TargetNotFound
from tasks_app.protocol.errors import A2AError, InternalError, MethodNotFound, Unauthenticated

logger = logging.getLogger(__name__)


def http_reply(reply: calls.Reply) -> HttpResponse:
    response = HttpResponse(reply.encoded(), status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers:
        response[name] = value
    return response


async def load_target(kind: str, target_id: str) -> gateway.Target:
    target = await sync_to_async(gateway.resolve_target)(kind, target_id)
    if target is None:
        raise TargetNotFound(f"no {kind} {target_id!r} at this relay")
    return target


class A2AView(APIView):
    """Shared by both bindings: API-key authentication, A2A error envelopes for everything."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasApiKey]
    parser_classes: list = []
    binding = calls.JSONRPC

    def handle_exception(self, exc):
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            exc = Unauthenticated(str(exc.detail))
        elif isinstance(exc, exceptions.MethodNotAllowed):
            # A verb no A2A route takes, answered like the REST binding's other wrong verbs.
            exc = MethodNotFound(f"{self.request.method} is not an A2A call here")
        elif isinstance(exc, exceptions.APIException):
            return super().handle_exception(exc)
        elif not isinstance(exc, A2AError):
            logger.exception("A2A call failed")
            exc = InternalError("the relay failed to handle this call")
        # Errors after parsing answer with the call's id and in its version.
        return http_reply(calls.failure_reply(self.binding, exc, getattr(self, "_call", None)))

    def get_authenticate_header(self, request):
        return 'Bearer realm="brass-relay"'


class JsonRpcView(A2AView):
    binding = calls.JSONRPC

    async def post(self, request, kind: str, target_id: str):
        call = calls.parse_jsonrpc_call(request.headers, request.body)
        self._call = call
        target = await load_target(kind, target_id)
        result = await calls.execute(target, call, request.auth)
        return http_reply(calls.result_reply(call, result,
                                             echo_extensions=calls.echoed(call, target)))


class RestView(A2AView):
    binding = calls.REST

    async def _handle(self, request, kind: str, target_id: str, rest: str):
        call = calls.parse_rest_call(request.method, rest, request.GET.lists() and {
            key: values for key, values in request.GET.lists()}, request.headers, request.body)
        self._call = call
        target = await load_target(kind, target_id)
        result = await calls.execute(target, call, request.auth)
        return http_reply(calls.result_reply(call, result,
                                             echo_extensions=calls.echoed(call, target)))

    async def get(self, request, kind, target_id, rest):
        return await self._handle(request, kind, target_id, rest)

    async def post(self, request, kind, target_id, rest):
        return await self._handle(request, kind, target_id, rest)

    async def delete(self, request, kind, target_id, rest):
        return await self._handle(request, kind, target_id, rest)
