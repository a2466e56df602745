"""The credentials ``make up`` needs: an admin user and an admin API key for the printed
examples. The first run makes them and writes them to ``credentials.txt`` in the var directory,
readable only by its owner (mode 0600); later runs reuse them and never show them again.

The file is ``name=value`` lines under a few comment lines, so a shell can read one value:
``sed -n 's/^api_key=//p' var/credentials.txt``.
"""

from __future__ import annotations

import os
import secrets
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from registry.models import ApiKey
from registry.secrets import hash_api_key
from registry.services import api_key_create, api_key_revoke

FILE_NAME = "credentials.txt"
KEY_NAME = "demo (run_relay)"
ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class Credentials:
    """What a run knows. ``new_password`` and ``new_key`` are set only in the run that made
    them: the one run that shows them."""

    path: Path
    admin_user: str
    new_password: str | None
    key: str | None
    new_key: str | None

    @property
    def saved(self) -> bool:
        return self.path.exists()


def credentials_ensure(*, var_dir: Path, with_key: bool) -> Credentials:
    """Makes what is missing: a superuser ``admin`` with a random password when there is no
    superuser, and (``with_key``) an admin API key when the file holds none that still works
    (the earlier demo keys are then revoked). Writes the file when it made anything, keeping the
    values it already held. Never logs a secret."""
    path = var_dir / FILE_NAME
    saved = read_saved(path)
    users = get_user_model()
    with transaction.atomic():
        superuser = users.objects.filter(is_superuser=True).order_by("pk").first()
        new_password = None
        if superuser is None:
            new_password = secrets.token_urlsafe(12)
            superuser = users.objects.create_superuser(
                ADMIN_USERNAME, "admin@localhost", new_password
            )
        key = saved.get("api_key")
        new_key = None
        if with_key and not key_usable(key):
            for old in ApiKey.objects.usable().filter(name=KEY_NAME):
                api_key_revoke(api_key=old)
            new_key = key = api_key_create(name=KEY_NAME, is_admin=True)[1]
        admin_user = superuser.get_username()
    if new_password or new_key:
        password = new_password
        if password is None and saved.get("admin_user") == admin_user:
            password = saved.get("admin_password")
        write_file(path, admin_user=admin_user, password=password, key=key)
    return Credentials(
        path=path,
        admin_user=admin_user,
        new_password=new_password,
        key=key if key_usable(key) else None,
        new_key=new_key,
    )


def key_usable(key: str | None) -> bool:
    return bool(key) and ApiKey.objects.usable().filter(key_hash=hash_api_key(key)).exists()


def read_saved(path: Path) -> dict[str, str]:
    """The file's values; empty when it is missing or cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        if equals and not line.startswith("#"):
            values[name.strip()] = value.strip()
    return values


def write_file(path: Path, *, admin_user: str, password: str | None, key: str | None) -> None:
    """Writes the file whole, mode 0600 from its first byte (a new file is renamed over the old
    one, so nobody ever reads half of it)."""
    lines = [
        "# Brass Relay: what `make up` (manage.py run_relay) made for you. Only you can read",
        "# this file. The password stays as made here; `manage.py changepassword` changes it.",
        f"admin_user={admin_user}",
    ]
    if password:
        lines.append(f"admin_password={password}")
    else:
        lines.append("# admin_password: not known here; `manage.py changepassword` sets one.")
    if key:
        lines.append(f"api_key={key}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with suppress(FileNotFoundError):
        partial.unlink()
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write("\n".join(lines) + "\n")
    os.chmod(partial, 0o600)  # whatever the umask
    os.replace(partial, path)
