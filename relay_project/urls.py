from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from routing import template_api
from routing.admin_teams import moved_team_admin

admin.site.site_header = "Brass Relay administration"
admin.site.site_title = "Brass Relay admin"
admin.site.index_title = "Agents, teams and tasks"
# The app list stays on the index page: beside every list it took a quarter of a 1280 px
# window and cut the lists' last columns.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    # Teams' admin pages moved from the registry's section to routing's; old links redirect.
    re_path(r"^admin/registry/team/(?P<rest>.*)$", moved_team_admin, name="moved-team-admin"),
    path("admin/", admin.site.urls),
    path("a2a/", include("registry.api.urls")),
    # Before tasks_app's a2a/tasks/<id>: "template" is not a task id.
    path("a2a/tasks/template", template_api.TemplateSendView.as_view(), name="task-template"),
    path(
        "a2a/tasks/template/sendSubscribe",
        template_api.TemplateSendSubscribeView.as_view(),
        name="task-template-subscribe",
    ),
    path("", include("tasks_app.api.urls")),
    path("", include("routing.urls")),
    path("api/schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("registry.urls")),
]
handler500 = "relay_project.database.server_error"
