"""The tenant groups that follow the provider's groups: single sign-on's `group_map` applied to
group memberships at every sign-in and every accepted provider token."""

from __future__ import annotations

import logging

from app.services.audit import Actor
from app.storage.collections import AccessStore

log = logging.getLogger(__name__)


class GroupsFollowProvider:
    """Adds a user to the mapped tenant groups and removes them from the other mapped ones;
    groups group_map does not name are left as admins set them."""

    def __init__(self, store: AccessStore) -> None:
        self._store = store

    def sync(
        self, *, tenant_id: str, user_id: str, wanted: set[str], managed: set[str], actor: Actor
    ) -> None:
        """Make the user a member of the `wanted` groups and of no other `managed` one."""
        for name in sorted(managed):
            group = self._store.find_group(tenant_id, name)
            if group is None:  # mapped, but the tenant has no such group (yet)
                log.info(
                    "tenant %s: group_map names group %r, which it does not have", tenant_id, name
                )
                continue
            member = name in wanted
            action = "group.member_added" if member else "group.member_removed"
            entry = actor.entry(
                action, target_id=group.group_id, user_id=user_id, via="single sign-on"
            )
            self._store.set_member(tenant_id, group.group_id, user_id, member, entry)
