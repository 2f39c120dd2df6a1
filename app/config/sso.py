"""The settings of single sign-on: the key that encrypts the tenants' stored secrets, and how
the service talks to identity providers.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from pydantic import BaseModel

from app.config.fields import setting


class SsoSettings(BaseModel):
    """Single sign-on with each tenant's OpenID Connect provider (docs/sso.md)."""

    secrets_key: str = setting(
        "",
        group="auth",
        description="Fernet key (32 bytes, URL-safe base64) that encrypts the secrets tenants "
        "store, such as their identity provider's client secret. Required to configure single "
        "sign-on in production; in development one is generated into RAG_DATA_DIR/secrets.key. "
        'Generate one with: python -c "from cryptography.fernet import Fernet; '
        'print(Fernet.generate_key().decode())"',
        repr=False,
    )
    sso_allow_http: bool = setting(
        False,
        group="auth",
        description="Accept an identity provider whose issuer is an http:// URL (tests and local "
        "providers only: tokens and the client secret would cross the network in clear).",
    )
    sso_http_timeout_s: float = setting(
        5.0,
        group="auth",
        unit="s",
        description="How long a call to an identity provider (discovery, code exchange, keys) "
        "may take before the sign-in fails with 503.",
        gt=0,
        le=60,
    )
    sso_jwks_cache_s: int = setting(
        3600,
        group="auth",
        unit="s",
        description="How long an identity provider's signing keys are trusted after they were "
        "fetched: while the provider is down, known keys keep working this long and unknown "
        "ones are refused. An unknown key id refetches the keys, at most once a minute per "
        "issuer.",
        ge=60,
        le=86400,
    )
