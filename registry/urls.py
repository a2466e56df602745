"""The registry's own pages for people: the skills page. The agent list and the agent page
show health, which routing records, so they are routing's (``routing.agent_pages``)."""

from django.urls import path

from registry import views

urlpatterns = [
    path("skills/", views.skills_page, name="skills-page"),
]
