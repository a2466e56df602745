"""Push-notification configs: create, read, list and delete, per task."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from registry import secrets
from relay_project import outbound
from tasks_app.models import PushNotificationConfig, Task
from tasks_app.protocol.errors import InvalidParams


def config_view(config: PushNotificationConfig) -> dict[str, Any]:
    """The config as A2A returns it. Credentials are not echoed back."""
    view: dict[str, Any] = {"id": config.config_id, "taskId": config.task_id, "url": config.url}
    if config.token:
        view["token"] = secrets.decrypt(config.token)
    if config.auth_scheme:
        view["authentication"] = {"scheme": config.auth_scheme}
    return view


def config_create(*, task: Task, config: dict[str, Any]) -> PushNotificationConfig:
    """Stores a webhook for the task. The URL must be http(s) with a host; whether its address
    is allowed is checked again at every delivery (it may resolve differently then)."""
    url = config.get("url") or ""
    try:
        outbound.check_url_shape(url)
    except outbound.UnsafeURLError as error:
        raise InvalidParams(f"push notification url: {error}") from error
    config_id = config.get("id") or task.id or str(uuid.uuid4())
    authentication = config.get("authentication") or {}
    with transaction.atomic():
        stored, _ = PushNotificationConfig.objects.update_or_create(
            task=task, config_id=config_id,
            defaults={
                "url": url,
                "token": secrets.encrypt(config.get("token") or ""),
                "auth_scheme": authentication.get("scheme", ""),
                "auth_credentials": secrets.encrypt(authentication.get("credentials") or ""),
            },
        )
        Task.objects.filter(pk=task.pk).update(has_push_configs=True)
        task.has_push_configs = True
    return stored


def config_get(*, task: Task, config_id: str) -> PushNotificationConfig | None:
    return PushNotificationConfig.objects.filter(task=task, config_id=config_id).first()


def config_list(*, task: Task) -> list[PushNotificationConfig]:
    return list(PushNotificationConfig.objects.filter(task=task).order_by("created_at"))


def config_delete(*, task: Task, config_id: str) -> None:
    """Idempotent: deleting a config that does not exist is fine."""
    with transaction.atomic():
        PushNotificationConfig.objects.filter(task=task, config_id=config_id).delete()
        if not PushNotificationConfig.objects.filter(task=task).exists():
            Task.objects.filter(pk=task.pk).update(has_push_configs=False)
