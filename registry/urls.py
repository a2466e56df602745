"""The registry's own pages for people. None today: the agent list and the agent page show
health, which routing records, so they are routing's (``routing.agent_pages``)."""

urlpatterns: list = []
