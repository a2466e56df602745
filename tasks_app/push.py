"""Push-notification configs: create, read, list and delete, per task."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from registry import secrets
from relay_project import outbound
from tasks_app.models import PushNotificationConfig, Task
from tasks_app.protocol.errors import FieldViolation, InvalidParams


def config_view(config: PushNotificationConfig) -> dict[str, Any]:
    """The config as A2A returns it, to the caller the task belongs to: the token as the
    caller set it (the spec returns the config as set, and the token is the caller's own
    secret, so it can check the notifications it receives), the authentication's scheme but
    not its credentials. Nothing else shows the token: the admin, the pages, the task API and
    the logs leave it out."""
    view: dict[str, Any] = {"id": config.config_id, "taskId": config.task_id, "url": config.url}
    if config.token:
        view["token"] = secrets.decrypt(config.token)
    if config.auth_scheme:
        view["authentication"] = {"scheme": config.auth_scheme}
    return view


# Longer values would not fit their columns; they are refused, not truncated.
_MAX_LENGTHS = (("url", 2048), ("id", 200))
_MAX_SCHEME_LENGTH = 50


def config_check(config: dict[str, Any], *, field: str = "") -> None:
    """Raises InvalidParams, naming the fields (under ``field``), when ``config`` cannot be
    stored. Callers check an inline config before they write anything, so a refused request
    leaves nothing behind."""
    prefix = f"{field}." if field else ""
    violations = []
    try:
        outbound.check_url_shape(config.get("url") or "")
        outbound.check_literal_address(config.get("url") or "")
    except outbound.UnsafeURLError as error:
        violations.append(FieldViolation(f"{prefix}url", str(error)))
    for name, limit in _MAX_LENGTHS:
        if len(config.get(name) or "") > limit:
            violations.append(FieldViolation(f"{prefix}{name}", f"is longer than {limit}"))
    if len((config.get("authentication") or {}).get("scheme") or "") > _MAX_SCHEME_LENGTH:
        violations.append(
            FieldViolation(f"{prefix}authentication.scheme", f"is longer than {_MAX_SCHEME_LENGTH}")
        )
    if violations:
        raise InvalidParams(field_violations=violations)


def config_create(*, task: Task, config: dict[str, Any]) -> PushNotificationConfig:
    """Stores a webhook for the task. The URL must be http(s) with a host, and not a private
    address literal (unless private URLs are allowed); what a host name resolves to is checked
    at every delivery (it may resolve differently then)."""
    config_check(config)
    url = config["url"]
    config_id = config.get("id") or task.id or str(uuid.uuid4())
    authentication = config.get("authentication") or {}
    with transaction.atomic():
        stored, _ = PushNotificationConfig.objects.update_or_create(
            task=task,
            config_id=config_id,
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
