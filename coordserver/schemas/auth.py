"""Auth, onboarding and user admin request models (API.md §2, §3, §18): invites, register, webhook, profile,
token and user PATCH."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.identities import LABEL_MAX
from ..domain.users import AVATAR_URL_MAX, DISPLAY_NAME_MAX
from .base import Model, PositiveInt32

_HOURS = "expiresInHours must be a number of hours between 0 and 8760"


class CreateInvite(Model):
    """POST /api/auth/invites (every field optional; no body at all is fine)."""
    __messages__ = {"expiresInHours": _HOURS}
    identity_hint: str | None = None
    is_admin: bool | None = None
    max_uses: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    expires_in_hours: Annotated[float, msgspec.Meta(gt=0, le=24 * 365)] | None = None

    def __post_init__(self) -> None:
        self.is_admin = bool(self.is_admin)
        self.max_uses = 1 if self.max_uses is None else self.max_uses
        self.expires_in_hours = 72 if self.expires_in_hours is None else self.expires_in_hours


class Register(Model):
    """POST /api/auth/register (no token): redeem an invite code for an identity and its token. `code` and
    `identity` are required (checked by api/auth.py register_identity, which the /onboard form shares)."""
    code: str | None = None
    identity: str | None = None
    label: str | None = None
    display_name: str | None = None


class SetWebhook(Model):
    """POST /api/auth/webhook: `url` null clears the webhook; `token` signs the deliveries."""
    __messages__ = {"url": "url is required (null clears the webhook)"}
    url: str | None
    token: Annotated[str, msgspec.Meta(min_length=16, max_length=128)] | None = None


class SetupProfile(Model):
    """POST /api/auth/setup-profile: the caller's display name (1-100 characters, trimmed)."""
    display_name: Any = None  # its rule and message are the domain's: domain/users.py display_name


class UserFields(Model):
    """PATCH /api/admin/users/{id} (admin): only the fields present change. Archiving (archivedAt set) revokes
    the identity's tokens; null restores. Rules and limits are domain/users.py's."""
    __messages__ = {"displayName": f"displayName must be 1–{DISPLAY_NAME_MAX} characters",
                    "avatarUrl": f"avatarUrl must be an http or https URL of at most {AVATAR_URL_MAX} characters, "
                                 "or null",
                    "archivedAt": "archivedAt must be an ISO-8601 timestamp or null"}
    display_name: Annotated[str, msgspec.Meta(description=f"1-{DISPLAY_NAME_MAX} characters, trimmed")] \
        | UnsetType = UNSET
    is_admin: bool | UnsetType = UNSET
    is_agent: bool | UnsetType = UNSET
    avatar_url: Annotated[str, msgspec.Meta(description="http or https")] | None | UnsetType = UNSET
    archived_at: Annotated[str, msgspec.Meta(description="ISO-8601 time")] | None | UnsetType = UNSET


class TokenFields(Model):
    """PATCH /api/auth/tokens/{id} (admin): each field optional; backupAgent null removes the backup."""
    __messages__ = {"staleTriggerHours": "staleTriggerHours must be an integer of at least 1",
                    "label": f"label must be a string of at most {LABEL_MAX} characters",
                    "backupAgent": "backupAgent must be an identity"}
    backup_agent: Annotated[str, msgspec.Meta(description="a known identity other than the token's")] \
        | None | UnsetType = UNSET
    stale_trigger_hours: PositiveInt32 | UnsetType = UNSET
    label: Annotated[str, msgspec.Meta(max_length=LABEL_MAX)] | None | UnsetType = UNSET
