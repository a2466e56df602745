"""The registry's own pages for people: the skills page. The agent list and the agent page
show health, which routing records, so they are routing's (``routing.agent_pages``). And the
discovery documents at well-known paths: the key set of the relay's card signatures and its
AI Catalog."""

from django.urls import path

from registry import discovery, views

urlpatterns = [
    path("skills/", views.skills_page, name="skills-page"),
    path(".well-known/jwks.json", discovery.key_set, name="relay-jwks"),
    path(".well-known/ai-catalog.json", discovery.AiCatalogView.as_view(), name="ai-catalog"),
    # The same catalog where Agentic Resource Discovery (ARD) looks first.
    path(".well-known/ard.json", discovery.ArdCatalogView.as_view(), name="ard-catalog"),
]
