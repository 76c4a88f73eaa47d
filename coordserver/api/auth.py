"""Auth, onboarding, tokens and webhook config (the user list: users.py; health: meta.py)."""
from __future__ import annotations

import asyncio

from quart import Blueprint

from ..auth import require_admin, require_identity
from ..context import coord
from ..domain import identities
from ..netcheck import validate_webhook_url
from ..schemas.auth import (CreateInvite, InviteCreated, Invites, Register, Registered, Rotated, SetWebhook,
                            TokenFields, TokenRecord, Tokens, Verified, WebhookSet, WebhookState)
from ..schemas.common import Error, Ok
from .common import accepts, body, path_int

bp = Blueprint("auth", __name__, url_prefix="/api")


@bp.route("/auth/verify", methods=["GET", "POST"])
@accepts(returns=Verified)
async def verify():
    principal = require_identity()
    return {"identity": principal.identity, "isAdmin": principal.is_admin}


@bp.post("/auth/invites")
@accepts(CreateInvite, body_required=False, returns=InviteCreated)
async def create_invite():
    """Create an invite code (admin); returns it with its onboarding URL."""
    principal = require_admin()
    data: CreateInvite = await body()
    hint = identities.valid_identity(data.identity_hint) if data.identity_hint is not None else None
    invite = await coord().store.write(identities.create_invite, principal.identity, hint, data.is_admin,
                                       data.max_uses, data.expires_in_hours, data.is_agent)
    return {"invite": invite, "onboardUrl": onboard_url(invite["code"])}


def onboard_url(code: str) -> str:
    return f"{coord().settings.base_url}/onboard?code={code}"


@bp.get("/auth/invites")
@accepts(returns=Invites)
async def list_invites():
    """Invites, newest first, each with its onboarding URL (ours), to hand out again."""
    require_admin()
    return {"invites": [{**invite, "onboardUrl": onboard_url(invite["code"])}
                        for invite in await coord().store.read(identities.list_invites)]}


@bp.delete("/auth/invites/<rowid:invite_id>")
@accepts(returns=Ok)
async def delete_invite(invite_id: str):
    require_admin()
    await coord().store.write(identities.delete_invite, path_int(invite_id))
    return {"ok": True}


@bp.post("/auth/register")
@accepts(Register, returns={200: Registered, 403: Error, 409: Error})  # 403: the invite is unknown, expired or
# used up; 409: the identity exists, or its displayName reads as another identity's name
async def register():
    """Redeem an invite code: creates the identity and returns its token (shown once)."""
    data: Register = await body()
    c = coord()
    return await c.store.write(identities.register, data.code, data.identity, data.label, data.display_name,
                               c.env_identities, data.is_agent)


@bp.get("/auth/tokens")
@accepts(returns=Tokens)
async def list_tokens():
    require_admin()
    return {"tokens": await coord().store.read(identities.list_tokens)}


@bp.patch("/auth/tokens/<rowid:token_id>")
@accepts(TokenFields, returns=TokenRecord)
async def update_token(token_id: str):
    """Set a token's backupAgent, staleTriggerHours or label (admin)."""
    require_admin()
    number = path_int(token_id)
    fields: TokenFields = await body()
    c = coord()
    return await c.store.write(identities.update_token, number, fields.changes(), c.env_identities)


@bp.post("/auth/tokens/<rowid:token_id>/revoke")
@accepts(returns=TokenRecord)
async def revoke_token(token_id: str):
    require_admin()
    return await coord().store.write(identities.revoke_token, path_int(token_id))


@bp.post("/auth/tokens/<rowid:token_id>/rotate")
@accepts(returns=Rotated)
async def rotate_token(token_id: str):
    principal = require_identity()
    return await coord().store.write(identities.rotate_token, path_int(token_id), principal)


@bp.get("/auth/webhook")
@accepts(returns=WebhookState)
async def get_webhook():
    principal = require_identity()
    c = coord()
    override = c.settings.webhook_overrides.get(principal.identity)
    return await c.store.read(identities.webhook_state, principal.identity, override)


@bp.post("/auth/webhook")
@accepts(SetWebhook, returns=WebhookSet)
async def set_webhook():
    """Set (or, with url null, clear) the caller's push webhook."""
    principal = require_identity()
    data: SetWebhook = await body()
    url = data.url
    if url is not None:
        c = coord()
        url = await asyncio.to_thread(validate_webhook_url, url, c.settings.webhook_allowed_hosts, c.resolver)
    return await coord().store.write(identities.set_webhook, principal.identity, url, data.token)

