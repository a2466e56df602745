"""ASGI entry point: ``daphne relay_project.asgi:application``.

Plain HTTP goes to Django; the streaming (SSE) endpoints are Channels consumers routed ahead of
it by the apps that own them.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")
django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402 - needs Django set up first

application = ProtocolTypeRouter({"http": django_application})
