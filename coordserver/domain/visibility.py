"""Who may see tagged things (notebook pages and directory entries share the rule)."""
from __future__ import annotations

from ..models import Token, User


def can_see(created_by: str, tagged_users: list[str] | None, identity: str, is_admin: bool) -> bool:
    """Admins and the creator always; everyone when untagged; otherwise only the tagged identities."""
    if is_admin or identity == created_by or not tagged_users:
        return True
    return identity in tagged_users


def is_owner(created_by: str, identity: str, is_admin: bool) -> bool:
    return is_admin or identity == created_by


def admin_identities(env_admins: frozenset[str] = frozenset()) -> set[str]:
    """Admins see everything tagged: environment admins, unarchived admin users and holders of live
    admin tokens. An archived admin is none: rights come from the current row (archiving revoked its
    tokens), so an identity restored later does not inherit audiences from its archived past."""
    users = {u.id for u in User.select(User.id).where((User.is_admin == True)  # noqa: E712
                                                       & User.archived_at.is_null())}
    tokens = {t.identity for t in Token.select(Token.identity)
              .where((Token.is_admin == True) & Token.revoked_at.is_null())}  # noqa: E712
    return users | tokens | set(env_admins)


def audience(created_by: str, tagged_users: list[str] | None, env_admins: frozenset[str] = frozenset()
             ) -> list[str] | None:
    """Who hears of a change to a tagged thing: None (everyone) when untagged."""
    if not tagged_users:
        return None
    return sorted(set(tagged_users) | {created_by} | admin_identities(env_admins))
