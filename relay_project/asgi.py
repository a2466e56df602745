"""ASGI entry point: ``daphne relay_project.asgi:application``.

A2A protocol calls go to the Channels consumer; everything else to Django
(see ``relay_project.routing``).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")
django_application = get_asgi_application()

# Imported after Django is set up: they load models.
from channels.routing import ProtocolTypeRouter  # noqa: E402

from relay_project.request_metrics import RequestMetricsMiddleware  # noqa: E402
from relay_project.routing import A2ARouter  # noqa: E402
from tasks_app.consumers import A2AConsumer  # noqa: E402

# Every HTTP request is counted for /metrics (relay_project.request_metrics).
application = ProtocolTypeRouter(
    {"http": RequestMetricsMiddleware(A2ARouter(django_application, A2AConsumer.as_asgi()))}
)
