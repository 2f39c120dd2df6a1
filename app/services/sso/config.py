"""A tenant's single sign-on settings: what an admin sends (PUT /sso, `app.cli set-sso`), how
it is checked, and what is shown back (never the client secret)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.domain import ROLES, Role
from app.errors import InvalidInput

if TYPE_CHECKING:
    from app.storage.sso import StoredSsoConfig

DEFAULT_SCOPES = ("openid", "profile", "email")
_DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,64}")  # RFC 6749 scope-token
_CLAIM = re.compile(r"[A-Za-z0-9_:/.-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

ProviderGroup = str
TenantGroup = str


def _clean_text(value: str, what: str) -> str:
    if _CONTROL.search(value):
        raise ValueError(f"{what} must not contain control characters")
    return value


class SsoSettingsIn(BaseModel):
    """The body of PUT /sso: the tenant's OpenID Connect provider and how its people map onto
    this service."""

    model_config = ConfigDict(extra="forbid")

    issuer: str = Field(
        min_length=1,
        max_length=512,
        description="the provider's issuer URL; discovery reads "
        "`<issuer>/.well-known/openid-configuration`. https only (http with "
        "RAG_SSO_ALLOW_HTTP=true, for tests and local providers)",
    )
    client_id: str = Field(min_length=1, max_length=255)
    client_secret: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="stored encrypted, never returned or logged; may be left out to keep the "
        "stored one",
    )
    display_name: str = Field(
        default="",
        max_length=64,
        description='shown on the sign-in page as "Sign in with <display_name>" (default: the '
        "issuer's host)",
    )
    scopes: list[str] = Field(default_factory=lambda: list(DEFAULT_SCOPES), max_length=20)
    groups_claim: str = Field(
        default="groups",
        description="the claim that lists the person's provider groups; a dotted path reads a "
        "nested claim (Keycloak's `realm_access.roles`)",
    )
    role_groups: dict[Role, list[ProviderGroup]] = Field(
        default_factory=dict,
        description="the provider groups that give each role; the highest role wins",
    )
    default_role: Role | None = Field(
        default=None,
        description="the role of someone in none of role_groups' groups; null refuses them",
    )
    group_map: dict[ProviderGroup, TenantGroup] = Field(
        default_factory=dict,
        description="provider group -> this tenant's group of the same people",
    )
    allowed_domains: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="email domains allowed to sign in; empty allows any",
    )
    accept_access_tokens: bool = Field(
        default=False,
        description="accept the provider's JWT access tokens as bearer tokens on the API",
    )
    audience: str | None = Field(
        default=None,
        max_length=255,
        description="the `aud` those access tokens must carry (required with accept_access_tokens)",
    )
    password_login: bool = Field(
        default=True,
        description="false: only break-glass admins (made with the CLI) keep password sign-in",
    )

    @field_validator("client_id", "display_name")
    @classmethod
    def _plain(cls, value: str) -> str:
        return _clean_text(value, "the value")

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        bad = [scope for scope in value if not _SCOPE.fullmatch(scope)]
        if bad:
            raise ValueError(f"not a scope: {bad[0]!r}")
        if "openid" not in value:
            raise ValueError("scopes must include openid")
        return list(dict.fromkeys(value))

    @field_validator("groups_claim")
    @classmethod
    def _claim(cls, value: str) -> str:
        if not _CLAIM.fullmatch(value):
            raise ValueError("groups_claim must be a claim name (letters, digits, _ : / . -)")
        return value

    @field_validator("role_groups")
    @classmethod
    def _role_groups(cls, value: dict[Role, list[str]]) -> dict[Role, list[str]]:
        for groups in value.values():
            if len(groups) > 200:
                raise ValueError("at most 200 provider groups per role")
            for group in groups:
                if not 1 <= len(group) <= 512:
                    raise ValueError("a provider group name is 1 to 512 characters")
                _clean_text(group, "a provider group name")
        return {role: list(dict.fromkeys(value[role])) for role in ROLES if role in value}

    @field_validator("group_map")
    @classmethod
    def _group_map(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 500:
            raise ValueError("at most 500 entries in group_map")
        for provider_group, tenant_group in value.items():
            if not 1 <= len(provider_group) <= 512:
                raise ValueError("a provider group name is 1 to 512 characters")
            if not 1 <= len(tenant_group.strip()) <= 64 or tenant_group != tenant_group.strip():
                raise ValueError(
                    "a tenant group name is 1 to 64 characters without spaces around it"
                )
            _clean_text(provider_group, "a provider group name")
            _clean_text(tenant_group, "a tenant group name")
        return value

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        cleaned = [domain.strip().lower().lstrip("@") for domain in value]
        bad = [domain for domain in cleaned if not _DOMAIN.fullmatch(domain)]
        if bad:
            raise ValueError(f"not an email domain: {bad[0]!r}")
        return list(dict.fromkeys(cleaned))

    @model_validator(mode="after")
    def _audience_with_tokens(self) -> SsoSettingsIn:
        if self.accept_access_tokens and not self.audience:
            raise ValueError("accept_access_tokens needs the audience the tokens carry")
        return self


def check_issuer(issuer: str, allow_http: bool) -> str:
    """The issuer as given, or InvalidInput: an absolute https URL (http only when allowed)
    without query or fragment."""
    parts = urlsplit(issuer)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise InvalidInput("issuer must be an absolute https:// URL")
    if parts.scheme == "http" and not allow_http:
        raise InvalidInput(
            "issuer must be https:// (an http:// issuer needs RAG_SSO_ALLOW_HTTP=true, meant for "
            "tests and local providers)"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise InvalidInput("issuer must not carry a query, a fragment or credentials")
    return issuer


def provider_name(settings: dict[str, Any], issuer: str) -> str:
    """What the sign-in page calls the provider: its display name, else the issuer's host."""
    return str(settings.get("display_name") or urlsplit(issuer).hostname or issuer)


def public_view(stored: StoredSsoConfig) -> dict[str, Any]:
    """The configuration as GET /sso shows it: everything but the secret, which is only said
    to be set."""
    return {
        "tenant_id": stored.tenant_id,
        "issuer": stored.issuer,
        "client_id": stored.client_id,
        "client_secret_set": True,
        **stored.settings,
        "display_name": provider_name(stored.settings, stored.issuer),
    }
