"""Tenants' secrets at rest: sealed with Fernet under RAG_SECRETS_KEY, refused with a message
that says how to fix it when there is no usable key, and a development key that survives a
restart."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from app.config import load_settings
from app.storage.secret_box import DEV_KEY_FILE, SecretBox, SecretsKeyProblem, build_secret_box

pytestmark = pytest.mark.unit

SECRET = "client-secret-of-acme-7f3c"


def test_a_sealed_secret_opens_again_and_never_shows_in_clear() -> None:
    box = SecretBox(Fernet.generate_key())
    first, second = box.seal(SECRET), box.seal(SECRET)
    assert SECRET not in first and first != second  # a fresh IV each time
    assert box.open(first) == SECRET == box.open(second)


def test_another_key_cannot_open_it() -> None:
    sealed = SecretBox(Fernet.generate_key()).seal(SECRET)
    with pytest.raises(SecretsKeyProblem, match="was the key changed"):
        SecretBox(Fernet.generate_key()).open(sealed)


def test_production_without_a_key_refuses_and_says_how_to_make_one(tmp_path: Path) -> None:
    settings = load_settings(
        _env_file=None, data_dir=tmp_path, env="production", jwt_secret="x" * 40
    )
    box = build_secret_box(settings)
    with pytest.raises(SecretsKeyProblem) as caught:
        box.seal(SECRET)
    assert "RAG_SECRETS_KEY is not set" in caught.value.message
    assert "Fernet.generate_key()" in caught.value.message
    assert not (tmp_path / DEV_KEY_FILE).exists()


def test_a_key_that_is_not_a_fernet_key_is_named() -> None:
    with pytest.raises(SecretsKeyProblem, match="not a Fernet key"):
        SecretBox(b"too-short").seal(SECRET)


def test_development_generates_a_private_key_that_survives_a_restart(tmp_path: Path) -> None:
    settings = load_settings(_env_file=None, data_dir=tmp_path, env="development")
    sealed = build_secret_box(settings).seal(SECRET)
    key_file = tmp_path / DEV_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert build_secret_box(settings).open(sealed) == SECRET  # the next process reads it
