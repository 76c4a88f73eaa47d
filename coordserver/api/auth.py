"""Auth, onboarding, tokens, webhook config, users and health."""
from __future__ import annotations

import asyncio

from quart import Blueprint

from ..auth import require_admin, require_identity
from ..context import coord
from ..domain import identities
from ..errors import Invalid
from ..netcheck import validate_webhook_url
from ..timeutil import iso
from .common import boolean, integer, json_object, path_int, text

bp = Blueprint("auth", __name__, url_prefix="/api")


@bp.route("/auth/verify", methods=["GET", "POST"])
async def verify():
    principal = require_identity()
    return {"identity": principal.identity, "isAdmin": principal.is_admin}


@bp.post("/auth/invites")
async def create_invite():
    principal = require_admin()
    body = await json_object(required=False)
    hint = body.get("identityHint")
    if hint is not None:
        hint = identities.valid_identity(hint)
    is_admin = boolean(body, "isAdmin", False)
    max_uses = integer(body, "maxUses", 1, minimum=1, maximum=1000)
    hours = body.get("expiresInHours", 72)
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not 0 < hours <= 24 * 365:
        raise Invalid("expiresInHours must be a number of hours between 0 and 8760")
    invite = await coord().store.write(identities.create_invite, principal.identity, hint, is_admin, max_uses, hours)
    return {"invite": invite, "onboardUrl": f"{coord().settings.base_url}/onboard?code={invite['code']}"}


@bp.get("/auth/invites")
async def list_invites():
    require_admin()
    return {"invites": await coord().store.read(identities.list_invites)}


@bp.delete("/auth/invites/<rowid:invite_id>")
async def delete_invite(invite_id: str):
    require_admin()
    await coord().store.write(identities.delete_invite, path_int(invite_id))
    return {"ok": True}


@bp.post("/auth/register")
async def register():
    body = await json_object()
    result = await register_identity(body.get("code"), body.get("identity"), body.get("label"),
                                     body.get("displayName"))
    return result


async def register_identity(code, identity, label, display_name) -> dict:
    """Shared by the JSON endpoint and the /onboard form."""
    if not isinstance(code, str) or not code.strip():
        raise Invalid("code is required")
    if identity is None or (isinstance(identity, str) and not identity.strip()):
        raise Invalid("identity is required")
    c = coord()
    result = await c.store.write(identities.register, code, identity, label or None, display_name or None,
                                 c.env_identities)
    c.services["tokens"].invalidate()
    return result


@bp.get("/auth/tokens")
async def list_tokens():
    require_admin()
    return {"tokens": await coord().store.read(identities.list_tokens)}


@bp.patch("/auth/tokens/<rowid:token_id>")
async def update_token(token_id: str):
    require_admin()
    body = await json_object()
    changes = {k: body[k] for k in ("backupAgent", "staleTriggerHours", "label") if k in body}
    c = coord()
    return await c.store.write(identities.update_token, path_int(token_id), changes, c.env_identities)


@bp.post("/auth/tokens/<rowid:token_id>/revoke")
async def revoke_token(token_id: str):
    require_admin()
    c = coord()
    record = await c.store.write(identities.revoke_token, path_int(token_id))
    c.services["tokens"].invalidate()
    return record


@bp.post("/auth/tokens/<rowid:token_id>/rotate")
async def rotate_token(token_id: str):
    principal = require_identity()
    c = coord()
    result = await c.store.write(identities.rotate_token, path_int(token_id), principal)
    c.services["tokens"].invalidate()
    return result


@bp.get("/auth/webhook")
async def get_webhook():
    principal = require_identity()
    c = coord()
    override = c.settings.webhook_overrides.get(principal.identity)
    return await c.store.read(identities.webhook_state, principal.identity, override)


@bp.post("/auth/webhook")
async def set_webhook():
    principal = require_identity()
    body = await json_object()
    if "url" not in body:
        raise Invalid("url is required (null clears the webhook)")
    url = body["url"]
    if url is not None:
        c = coord()
        url = await asyncio.to_thread(validate_webhook_url, url, c.settings.webhook_allowed_hosts, c.resolver)
    token = text(body, "token", max_len=128)
    if token is not None and len(token) < 16:
        raise Invalid("token must be at least 16 characters")
    return await coord().store.write(identities.set_webhook, principal.identity, url, token)


@bp.get("/users")
async def list_users():
    require_identity()
    c = coord()
    users = await c.store.read(identities.list_users, c.env_identities)
    presence = c.services["presence"]
    for user in users:
        seen = presence.last_seen(user["id"])
        if seen is not None:
            user["lastSeenAt"] = iso(seen[0])
    return {"users": users}


@bp.get("/health")
async def health():
    return {"status": "ok", "timestamp": iso(coord().now())}
