"""The settings of tokens, API keys, passwords, audit retention and the per-client rate limits.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.config.fields import setting
from app.config.storage import CacheBackend
from app.request_limits import PAGE_SIZE_CEILING, QUESTION_CHARS_CEILING

# The longest access token lifetime RAG_JWT_TTL_S accepts: one day (docs/api.md, "Sign-out and
# revocation").
JWT_TTL_CAP_S = 24 * 3600


class AuthSettings(BaseModel):
    """Tokens, API keys, passwords, audit retention and the per-client rate limits."""

    jwt_secret: str = setting(
        "",
        group="auth",
        description="HS256 key, at least 32 bytes; required unless RAG_ENV=development. Generate "
        'one with: python -c "import secrets; print(secrets.token_urlsafe(48))"',
        repr=False,
    )
    jwt_issuer: str = setting("rag-service", group="auth", description="Issuer of the tokens.")
    jwt_audience: str = setting("rag-api", group="auth", description="Audience of the tokens.")
    jwt_ttl_s: int = setting(
        3600,
        group="auth",
        unit="s",
        description="Access token lifetime, at most 86400 (one day): a leaked token works until "
        "it expires unless it is signed out (POST /auth/logout), so the window is bounded. A "
        "token whose exp - iat exceeds it (by more than 60 s) is refused, so lowering it also "
        "ends longer tokens already issued.",
        gt=0,
        le=JWT_TTL_CAP_S,
    )
    api_key_secret: str = setting(
        "",
        group="auth",
        description="Server secret API keys are stored under (HMAC-SHA256). Empty: derived from "
        "RAG_JWT_SECRET, so rotating that secret also invalidates every API key; set this to "
        "rotate them separately.",
        repr=False,
    )
    revocation_backend: Literal["database", "redis"] = setting(
        "database",
        group="auth",
        description="Where signed-out tokens are kept until they expire: database or redis "
        "(RAG_REDIS_URL).",
    )
    audit_retention_days: int = setting(
        365,
        group="auth",
        unit="days",
        description="Audit log entries (logins, keys, users, uploads, deletions) older than this "
        "are deleted.",
        ge=1,
        le=36500,
    )
    bcrypt_rounds: int = setting(
        12, group="auth", unit="log2 rounds", description="bcrypt cost (12..16).", ge=12, le=16
    )
    rate_limit_auth_per_minute: int = setting(
        10,
        group="auth",
        unit="per minute",
        description="Logins per client IP on /auth/token.",
        gt=0,
    )
    rate_limit_query_per_minute: int = setting(
        120,
        group="auth",
        unit="per minute",
        description="Requests per user on /query and /search.",
        gt=0,
    )
    rate_limit_pages_per_minute: int = setting(
        120,
        group="auth",
        unit="per minute",
        description="Requests per user on the cited-page routes (/documents/{id}/pages/...).",
        gt=0,
    )
    rate_limit_conversations_per_minute: int = setting(
        30,
        group="auth",
        unit="per minute",
        description="Conversations one user may start (POST /conversations); over it, 429 with "
        "Retry-After.",
        gt=0,
    )
    rate_limit_keys_per_minute: int = setting(
        10,
        group="auth",
        unit="per minute",
        description="API keys one user may make (POST /auth/keys); over it, 429 with Retry-After.",
        gt=0,
    )
    rate_limit_backend: CacheBackend = setting(
        "memory",
        group="auth",
        description="Rate limits: memory | redis (shared by every API process).",
    )
    max_question_chars: int = setting(
        2000,
        group="auth",
        unit="characters",
        description=f"Longest question or search query (at most {QUESTION_CHARS_CEILING}; "
        "app/request_limits.py).",
        gt=0,
        le=QUESTION_CHARS_CEILING,
    )
    max_page_size: int = setting(
        100,
        group="auth",
        unit="items",
        description=f"Largest page a document, job or conversation listing returns (at most "
        f"{PAGE_SIZE_CEILING}).",
        gt=0,
        le=PAGE_SIZE_CEILING,
    )
