"""The credentials ``make up`` makes once and keeps in ``var/credentials.txt``."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth import get_user_model

from registry.models import ApiKey
from routing.console.credentials import credentials_ensure, key_usable, read_saved

pytestmark = pytest.mark.django_db


def test_the_first_run_makes_an_admin_and_a_key_and_writes_them_to_a_private_file(tmp_path):
    made = credentials_ensure(var_dir=tmp_path, with_key=True)
    assert made.new_password and made.new_key and made.key == made.new_key
    assert stat.S_IMODE(made.path.stat().st_mode) == 0o600
    assert read_saved(made.path) == {
        "admin_user": "admin",
        "admin_password": made.new_password,
        "api_key": made.new_key,
    }
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(made.new_password)
    assert ApiKey.objects.get().is_admin


def test_a_second_run_reuses_everything_and_shows_no_secret(tmp_path):
    first = credentials_ensure(var_dir=tmp_path, with_key=True)
    text = first.path.read_text()
    again = credentials_ensure(var_dir=tmp_path, with_key=True)
    assert again.new_password is None and again.new_key is None
    assert again.key == first.key and again.admin_user == "admin"
    assert first.path.read_text() == text and ApiKey.objects.count() == 1


def test_a_deleted_file_gives_a_new_key_revokes_the_old_and_says_the_password_is_unknown(tmp_path):
    first = credentials_ensure(var_dir=tmp_path, with_key=True)
    first.path.unlink()
    again = credentials_ensure(var_dir=tmp_path, with_key=True)
    assert again.new_password is None and again.new_key and again.new_key != first.key
    assert not key_usable(first.key) and key_usable(again.key)
    saved = read_saved(again.path)
    assert saved == {"admin_user": "admin", "api_key": again.new_key}
    assert "changepassword" in again.path.read_text()
    assert stat.S_IMODE(again.path.stat().st_mode) == 0o600


def test_a_revoked_key_in_the_file_is_replaced_and_the_password_line_kept(tmp_path):
    first = credentials_ensure(var_dir=tmp_path, with_key=True)
    ApiKey.objects.update(revoked_at="2020-01-01T00:00:00Z")
    again = credentials_ensure(var_dir=tmp_path, with_key=True)
    assert again.new_key and read_saved(again.path)["admin_password"] == first.new_password


def test_an_existing_superuser_is_kept_under_its_own_name(tmp_path):
    get_user_model().objects.create_superuser("ops", "ops@localhost", "x-long-password-1")
    made = credentials_ensure(var_dir=tmp_path, with_key=False)
    assert made.admin_user == "ops" and made.new_password is None and made.key is None
    assert not made.path.exists()  # nothing was made, so nothing is written
