"""Auth, onboarding and user admin request and response models (API.md §2, §3, §18): invites, register, tokens,
webhook, profile, token and user PATCH."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.fields import HTTP_URL
from ..domain.guards import LOOP_MESSAGES_MAX, LOOP_MINUTES_MAX
from ..domain.identities import LABEL_MAX
from ..domain.users import AVATAR_URL_MAX, DISPLAY_NAME_MAX
from ..netcheck import URL_MAX, URL_PATTERN
from .base import Model, PositiveInt32, text
from .common import Identity, Time

_HOURS = "expiresInHours must be a number of hours between 0 and 8760"


class CreateInvite(Model):
    """POST /api/auth/invites (every field optional; no body at all is fine)."""
    __messages__ = {"expiresInHours": _HOURS}
    identity_hint: Identity | None = None
    is_admin: bool | None = None
    is_agent: Annotated[bool, msgspec.Meta(description="the kind its registrations get; absent or null: as each "
                                                       "registrant says (human by default)")] | None = None
    max_uses: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    expires_in_hours: Annotated[float, msgspec.Meta(gt=0, le=24 * 365)] | None = None

    def __post_init__(self) -> None:
        self.is_admin = bool(self.is_admin)
        self.max_uses = 1 if self.max_uses is None else self.max_uses
        self.expires_in_hours = 72 if self.expires_in_hours is None else self.expires_in_hours


class Register(Model):
    """POST /api/auth/register (no token): redeem an invite code for an identity and its token. `code` and
    `identity` are required (checked by api/auth.py register_identity, which the /onboard form shares)."""
    code: Annotated[str, text()]
    identity: Identity
    label: Annotated[str, msgspec.Meta(max_length=LABEL_MAX)] | None = None
    display_name: Annotated[str, msgspec.Meta(max_length=DISPLAY_NAME_MAX)] | None = None
    is_agent: Annotated[bool, msgspec.Meta(description="an agent (true) or a human (false, the default); an "
                                                       "invite that names a kind decides instead")] | None = None


class SetWebhook(Model):
    """POST /api/auth/webhook: `url` null clears the webhook; `token` signs the deliveries."""
    __messages__ = {"url": "url is required (null clears the webhook)", "url:length": f"url longer than {URL_MAX} characters",
                    "url:format": "url must be an http:// or https:// URL with a host"}
    url: Annotated[str, msgspec.Meta(max_length=URL_MAX, pattern=URL_PATTERN,
                                     description="http or https; null clears the webhook")] | None
    token: Annotated[str, msgspec.Meta(min_length=16, max_length=128)] | None = None


class SetupProfile(Model):
    """POST /api/auth/setup-profile: the caller's display name (1-100 characters, trimmed)."""
    __messages__ = {"displayName": f"displayName must be 1–{DISPLAY_NAME_MAX} characters"}
    display_name: Annotated[str, text(DISPLAY_NAME_MAX, description="trimmed")]


class UserFields(Model):
    """PATCH /api/admin/users/{id} (admin): only the fields present change. Archiving (archivedAt set) revokes
    the identity's tokens; null restores. Rules and limits are domain/users.py's."""
    __messages__ = {"displayName": f"displayName must be 1–{DISPLAY_NAME_MAX} characters",
                    "avatarUrl": f"avatarUrl must be an http or https URL of at most {AVATAR_URL_MAX} characters, "
                                 "or null",
                    "archivedAt": "archivedAt must be an ISO-8601 timestamp or null",
                    "loopMessages": f"loopMessages must be an integer from 1 to {LOOP_MESSAGES_MAX}, or null",
                    "loopMinutes": f"loopMinutes must be an integer from 1 to {LOOP_MINUTES_MAX}, or null"}
    display_name: Annotated[str, text(DISPLAY_NAME_MAX, description="trimmed")] | UnsetType = UNSET
    is_admin: bool | UnsetType = UNSET
    is_agent: bool | UnsetType = UNSET
    avatar_url: Annotated[str, msgspec.Meta(max_length=AVATAR_URL_MAX, pattern=HTTP_URL.pattern,
                                            description="http or https")] | None | UnsetType = UNSET
    archived_at: Time | None | UnsetType = UNSET
    loop_messages: Annotated[int, msgspec.Meta(
        ge=1, le=LOOP_MESSAGES_MAX, description="its loop guard trips above this many messages within its window; "
                                                "null: the deployment's")] | None | UnsetType = UNSET
    loop_minutes: Annotated[int, msgspec.Meta(
        ge=1, le=LOOP_MINUTES_MAX, description="its loop guard's window; null: the deployment's")] \
        | None | UnsetType = UNSET


class TokenFields(Model):
    """PATCH /api/auth/tokens/{id} (admin): each field optional; backupAgent null removes the backup."""
    __messages__ = {"staleTriggerHours": "staleTriggerHours must be an integer of at least 1",
                    "label": f"label must be a string of at most {LABEL_MAX} characters",
                    "backupAgent": "backupAgent must be an identity"}
    backup_agent: Annotated[Identity, msgspec.Meta(description="a known identity other than the token's")] \
        | None | UnsetType = UNSET
    stale_trigger_hours: PositiveInt32 | UnsetType = UNSET
    label: Annotated[str, msgspec.Meta(max_length=LABEL_MAX)] | None | UnsetType = UNSET


class Verified(Model):
    """Who the token speaks for."""
    identity: str
    is_admin: bool


class Invite(Model):
    """An invite code and its use."""
    id: int
    code: str
    created_by: str
    identity_hint: str | None
    is_admin: bool
    max_uses: int
    use_count: int
    expires_at: Time | None
    created_at: Time
    webhook_token: str | None
    is_agent: bool | None = None  # the kind its registrations get; null: as each registrant says


class InviteCreated(Model):
    """A new invite and the page that redeems it."""
    invite: Invite
    onboard_url: str


class ListedInvite(Invite, kw_only=True):
    """An invite as listed: with the page that redeems it (ours, additive), so it can be handed out again."""
    onboard_url: str


class Invites(Model):
    """Invites, newest first."""
    invites: list[ListedInvite]


class IssuedToken(Verified):
    """A new token: its plaintext, shown this once."""
    token: str


class Registered(IssuedToken):
    """The identity created by redeeming an invite, with its token."""
    message: str
    is_agent: bool = False  # its kind (who is who)


class NewToken(IssuedToken):
    id: int


class Rotated(Model):
    """The replacement of a revoked token."""
    previous_token_id: int
    new_token: NewToken
    message: str


class TokenRecord(Model):
    """A database token, never its secret; `webhookToken` shows the last 4 characters only."""
    id: int
    identity: str
    is_admin: bool
    label: str | None
    created_by: str | None
    created_at: Time
    expires_at: Time | None
    last_used_at: Time | None
    revoked_at: Time | None
    webhook_token: str | None
    webhook_url: str | None
    backup_agent: str | None
    stale_trigger_hours: int


class Tokens(Model):
    """Tokens, newest first."""
    tokens: list[TokenRecord]


class _WebhookOf(Model):
    identity: str
    webhook_url: str | None


class Deliveries(Model):
    """Push outcomes for the identity."""
    pending: int
    failed: int
    last_success_at: Time | None
    last_error: str | None


class WebhookState(_WebhookOf):
    """The caller's push webhook and how its deliveries went."""
    configured: bool
    deliveries: Deliveries


class WebhookSet(_WebhookOf):
    """The webhook registered or cleared; a generated signing token is returned once, as `webhookToken`."""
    ok: bool
    message: str
    webhook_token: str | UnsetType = UNSET
