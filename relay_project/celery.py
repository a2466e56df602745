"""The Celery application. Jobs live in each app's ``tasks.py`` and are found automatically."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")

app = Celery("relay_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
