"""Who may see tagged things (notebook pages and directory entries share the rule)."""
from __future__ import annotations


def can_see(created_by: str, tagged_users: list[str] | None, identity: str, is_admin: bool) -> bool:
    """Admins and the creator always; everyone when untagged; otherwise only the tagged identities."""
    if is_admin or identity == created_by or not tagged_users:
        return True
    return identity in tagged_users


def is_owner(created_by: str, identity: str, is_admin: bool) -> bool:
    return is_admin or identity == created_by
