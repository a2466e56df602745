from django.urls import path

from registry import views

urlpatterns = [
    path("", views.registry_page, name="registry-page"),
]
