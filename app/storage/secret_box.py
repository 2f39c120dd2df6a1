"""Secrets a tenant stores (its identity provider's client secret), encrypted at rest with
Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`) under RAG_SECRETS_KEY.

The key lives in the settings, never in the database, so a copy of the database alone reveals
no secret. In development, without a key, one is generated once into the data directory (mode
0600) so stored secrets survive a restart; in production a missing key refuses to store or read
a secret, with a message that says how to make one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from app.config import Settings
from app.errors import SecretsKeyProblem

log = logging.getLogger(__name__)

__all__ = ["DEV_KEY_FILE", "SecretBox", "SecretsKeyProblem", "build_secret_box"]

DEV_KEY_FILE = "secrets.key"
MISSING_KEY = (
    "RAG_SECRETS_KEY is not set: it encrypts the identity provider's client secret. Generate "
    "one with `python -c 'from cryptography.fernet import Fernet; "
    "print(Fernet.generate_key().decode())'`"
)


class SecretBox:
    """Encrypts and decrypts short secrets; ConfigurationError when it has no usable key."""

    def __init__(self, key: bytes | None) -> None:
        self._fernet: Fernet | None = None
        self._problem = MISSING_KEY
        if key:
            try:
                self._fernet = Fernet(key)
            except ValueError:
                self._problem = (
                    "RAG_SECRETS_KEY is not a Fernet key (32 bytes in URL-safe base64); "
                    + MISSING_KEY.split(": ", 1)[1]
                )

    def _box(self) -> Fernet:
        if self._fernet is None:
            raise SecretsKeyProblem(self._problem)
        return self._fernet

    def seal(self, secret: str) -> str:
        """The encrypted form of a secret (ASCII, different every time)."""
        return self._box().encrypt(secret.encode("utf-8")).decode("ascii")

    def open(self, sealed: str) -> str:
        """The secret back; ConfigurationError when the key is not the one that sealed it."""
        try:
            return self._box().decrypt(sealed.encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise SecretsKeyProblem(
                "a stored secret cannot be decrypted with RAG_SECRETS_KEY (was the key "
                "changed?): set the tenant's single sign-on again"
            ) from None


def _development_key(data_dir: Path) -> bytes:
    path = data_dir / DEV_KEY_FILE
    if path.exists():
        return path.read_bytes().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key)
    log.warning("RAG_SECRETS_KEY is not set; generated a development key in %s", path)
    return key


def build_secret_box(settings: Settings) -> SecretBox:
    """The box keyed by RAG_SECRETS_KEY, or in development a key kept in the data directory."""
    if settings.secrets_key:
        return SecretBox(settings.secrets_key.encode("ascii", errors="replace"))
    if settings.env == "development":
        try:
            return SecretBox(_development_key(Path(settings.data_dir)))
        except FileExistsError:  # another process wrote it between the check and the write
            return SecretBox((Path(settings.data_dir) / DEV_KEY_FILE).read_bytes().strip())
    return SecretBox(None)
