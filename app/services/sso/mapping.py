"""From a provider's claims to this service's view of a person: the groups, the role they
give, whether the email domain is allowed, and the user name a new user gets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.domain import ROLES, Role, role_rank

# The column's length (app/storage/tables.py UserRow.username).
MAX_USERNAME_CHARS = 64


def provider_groups(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups a token lists under `claim` (a dotted path reads nested objects, as
    Keycloak's `realm_access.roles`): a list of strings, or one string for a single group."""
    value: Any = claims
    for part in claim.split("."):
        if not isinstance(value, Mapping) or part not in value:
            value = claims.get(claim)  # a claim whose own name has dots (URL-like names)
            break
        value = value[part]
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str) and item]
    return []


def mapped_role(
    groups: Iterable[str], role_groups: Mapping[str, list[str]], default_role: Role | None
) -> Role | None:
    """The highest role any of the groups gives, else the default (None: refused)."""
    have = set(groups)
    best: Role | None = None
    for role in ROLES:
        if have.intersection(role_groups.get(role, ())) and (
            best is None or role_rank(role) > role_rank(best)
        ):
            best = role
    return best if best is not None else default_role


def mapped_tenant_groups(groups: Iterable[str], group_map: Mapping[str, str]) -> set[str]:
    """The tenant groups the provider groups stand for."""
    return {group_map[group] for group in groups if group in group_map}


def email_of(claims: Mapping[str, Any]) -> str | None:
    """The token's email address, unless the provider says it is not verified."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        return None
    if claims.get("email_verified") is False:
        return None
    return email.strip().lower()


def domain_allowed(claims: Mapping[str, Any], allowed_domains: list[str]) -> bool:
    """Whether the person's (verified) email domain is allowed; any when the list is empty."""
    if not allowed_domains:
        return True
    email = email_of(claims)
    return email is not None and email.rsplit("@", 1)[1] in allowed_domains


def username_for(claims: Mapping[str, Any]) -> str:
    """A new user's name: `preferred_username`, else the email, else the subject."""
    for name in (claims.get("preferred_username"), email_of(claims), claims.get("sub")):
        if isinstance(name, str) and name.strip():
            return name.strip()[:MAX_USERNAME_CHARS]
    return str(claims["sub"])[:MAX_USERNAME_CHARS]
