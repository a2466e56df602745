"""WSGI entry point, for tools that want one; the relay itself is served over ASGI by daphne."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")
application = get_wsgi_application()
