"""The relay's discovery documents at well-known paths: the key set that verifies the cards it
signs (``/.well-known/jwks.json``) and its AI Catalog (``/.well-known/ai-catalog.json``, built by
``registry.catalog``). The key set is public, like the cards it verifies; the catalog is read
as the registry is (public unless RELAY_REGISTRY_PUBLIC is off)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import catalog, jwks
from registry.api.schema import AI_CATALOG, errors, example
from registry.auth import RegistryReadPermission
from relay_project.public_url import relay_base_url

KEY_SET_CACHE_CONTROL = "public, max-age=300"


@require_safe
def key_set(request: HttpRequest) -> JsonResponse:
    """``GET /.well-known/jwks.json``: the public key of the relay's card signatures (no keys
    when the relay does not sign)."""
    key = jwks.relay_key()
    response = JsonResponse(key.jwks() if key else {"keys": []})
    response["Cache-Control"] = KEY_SET_CACHE_CONTROL
    return response


def catalog_link_header(request: HttpRequest) -> str:
    """The ``Link`` header value pointing at the relay's catalog (at both well-known paths)."""
    return (
        f'<{relay_base_url(request, "/.well-known/ai-catalog.json")}>; rel="ai-catalog", '
        f'<{relay_base_url(request, "/.well-known/ard.json")}>; rel="ard"'
    )


class AiCatalogView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="ai_catalog",
        summary="The relay's AI Catalog",
        description="Every agent (not disabled, not mirrored from a peer) and every enabled "
        "team, as AI Catalog entries: a urn:air identifier, the card URL at the relay, "
        "description, tags, capabilities (skill ids) and representativeQueries (skill "
        "examples).",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **errors(401, 429)},
        examples=[example("A catalog", AI_CATALOG)],
    )
    def get(self, request: Request) -> Response:
        document = catalog.relay_catalog(
            base_url=relay_base_url(request, "/"), publisher=catalog.publisher_for(request)
        )
        response = Response(document, content_type=catalog.MEDIA_TYPE)
        response["Cache-Control"] = catalog.CACHE_CONTROL
        response["Link"] = catalog_link_header(request)
        return response


class ArdCatalogView(AiCatalogView):
    @extend_schema(
        operation_id="ard_catalog",
        summary="The relay's catalog at ARD's path",
        description="The same document as /.well-known/ai-catalog.json, where Agentic Resource "
        "Discovery consumers look first.",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **errors(401, 429)},
        examples=[example("A catalog", AI_CATALOG)],
    )
    def get(self, request: Request) -> Response:
        return super().get(request)
