"""Points every page and every card the relay serves at its AI Catalog, with a ``Link`` header
(``rel="ai-catalog"``, and ``rel="ard"`` for the same catalog at ARD's path), so a crawler that
lands anywhere on the relay finds the catalog."""

from __future__ import annotations

from relay_project.public_url import relay_base_url

CATALOG_PATH = "/.well-known/ai-catalog.json"
ARD_PATH = "/.well-known/ard.json"


class CatalogLinkMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.method in ("GET", "HEAD") and _links_catalog(request, response):
            link = (
                f'<{relay_base_url(request, CATALOG_PATH)}>; rel="ai-catalog", '
                f'<{relay_base_url(request, ARD_PATH)}>; rel="ard"'
            )
            existing = response.get("Link")
            response["Link"] = f"{existing}, {link}" if existing else link
        return response


def _links_catalog(request, response) -> bool:
    if request.path in (CATALOG_PATH, ARD_PATH) or response.status_code >= 400:
        return False
    content_type = response.get("Content-Type", "")
    return content_type.startswith("text/html") or request.path.endswith("/agent-card.json")
