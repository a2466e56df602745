"""Encryption at rest for upstream credentials, and keys for callers of the relay.

Credentials are encrypted with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under
``RELAY_ENCRYPTION_KEY``; without one, a key is derived from ``SECRET_KEY``. API keys are random
and long, so a plain SHA-256 is a sound way to store them: there is nothing to brute-force.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

API_KEY_PREFIX = "br_"


@cache
def _fernet(key_setting: str, secret_key: str) -> Fernet:
    if key_setting:
        return Fernet(key_setting.encode())
    derived = hashlib.sha256(b"brass-relay credentials\x00" + secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def fernet() -> Fernet:
    return _fernet(settings.RELAY_ENCRYPTION_KEY, settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    return fernet().encrypt(plaintext.encode()).decode() if plaintext else ""


def decrypt(token: str) -> str:
    """Decrypts a stored credential; an empty token is an empty credential.

    Raises ValueError when the token was made with another key.
    """
    if not token:
        return ""
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken as error:
        raise ValueError(
            "the stored credential cannot be decrypted with the current key"
        ) from error


def mask(secret: str) -> str:
    """Shows at most the first four characters of a secret: enough to recognise, not to use."""
    if not secret:
        return ""
    return secret[:4] + "…" if len(secret) > 8 else "…"


def new_api_key() -> tuple[str, str, str]:
    """Returns (key, prefix, sha256 hex). The key is shown once and never stored."""
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    return key, api_key_prefix(key), hash_api_key(key)


def api_key_prefix(key: str) -> str:
    """The public first characters of a key, which name it in lists, logs and rate limits."""
    return key[: len(API_KEY_PREFIX) + 8]


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
