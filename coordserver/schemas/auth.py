"""Auth and onboarding request models (API.md §2, §3): invites, register, webhook, profile."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .base import Model

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
