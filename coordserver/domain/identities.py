"""Users, tokens, invites and webhook configs. Plain functions run inside Store units of work."""
from __future__ import annotations

import re
import secrets
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

import peewee as pw

from .. import db
from ..jsonstrict import JSONObject
from ..events import log as event_log
from ..principal import Principal, hash_token, new_token
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..models import Invite, Message, PushDelivery, Token, User, WebhookConfig
from ..settings import IDENTITY_RE
from ..timeutil import from_db, iso, to_db
from .lookalike import require_own_name
from ..events.channels import CONTROL, TOKENS, WAKE_CHANGED, ControlPayload, TokensPayload, WakeChangedPayload

REGISTER_NOTICE = ("Store this token now: it is shown only once and cannot be recovered. "
                   "Send it as 'Authorization: Bearer <token>'. Start with GET /api/skill.")
ROTATE_NOTICE = "The previous token is revoked. Store the new token now: it is shown only once."
REVOCATION_EVENT = "token_revoked"
REVOCATION_REASONS = ("revoked", "rotated", "archived")
IDENTITY_MAX = 50
# As sent (trimmed): at most IDENTITY_MAX characters of IDENTITY_RE in either case, lowered once it matches.
IDENTITY_INPUT_RE = re.compile(rf"^[A-Za-z][A-Za-z0-9_-]{{0,{IDENTITY_MAX - 1}}}$")
LABEL_MAX = 100  # a token's label
STALE_HOURS_MAX = 2**31 - 1  # what the column holds


def valid_identity(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("identity is required")
    identity = value.strip()
    if not IDENTITY_INPUT_RE.match(identity):
        raise Invalid(f"identity must match {IDENTITY_RE.pattern} and be at most {IDENTITY_MAX} characters")
    return identity.lower()


def optional_label(value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > LABEL_MAX):
        raise Invalid(f"label must be a string of at most {LABEL_MAX} characters")
    return value


# --- known identities ------------------------------------------------------------------------

def known_identities(env_identities: frozenset[str]) -> set[str]:
    archived = {u.id for u in User.select(User.id).where(User.archived_at.is_null(False))}
    users = {u.id for u in User.select(User.id)}
    tokens = {t.identity for t in Token.select(Token.identity).distinct()}
    return (users | tokens | set(env_identities)) - archived


# May receive mail, chat and tasks: a user that is not archived; without a user row, an environment
# identity or one holding a token. As SQL, so a guarded insert can check it in its own statement
# (domain/messages.py: one round trip per send on PostgreSQL); KNOWN_SQL's parameters: known_params.
def known_sql(identity: str = "?", in_env: str = "?") -> str:
    """The rule over SQL expressions: `identity` and whether it is an environment identity."""
    return (f'COALESCE((SELECT archived_at IS NULL FROM "user" WHERE id = {identity}), '
            f'{in_env} OR EXISTS (SELECT 1 FROM token WHERE identity = {identity}))')


KNOWN_SQL = known_sql()


def known_params(identity: str, env_identities: frozenset[str]) -> tuple[str, bool, str]:
    return identity, identity in env_identities, identity


def is_known(identity: str, env_identities: frozenset[str]) -> bool:
    """May receive mail, chat and tasks: a user, environment or token identity, and not archived."""
    return bool(db.sql_rows("SELECT " + KNOWN_SQL, known_params(identity, env_identities))[0][0])


def is_archived(identity: str) -> bool:
    """An archived users row: its environment token, if any, is refused too (auth.TokenResolver)."""
    return User.select().where((User.id == identity) & User.archived_at.is_null(False)).exists()


def archived_among(identities: list[str]) -> set[str]:
    """Which of these identities are archived users (they receive no new mail, chat or tasks)."""
    if not identities:
        return set()
    return {u.id for u in User.select(User.id).where(User.id.in_(identities) & User.archived_at.is_null(False))}


def actors(env_identities: frozenset[str]) -> set[str]:
    """Identities that can act (API.md §18): unarchived users holding an unrevoked, unexpired token,
    plus environment identities (unless archived). Presence and /api/users list these alone."""
    live = (Token.select(Token.identity).join(User, on=(User.id == Token.identity))
            .where(Token.revoked_at.is_null() & (Token.expires_at.is_null() | (Token.expires_at > to_db(db.now())))
                   & User.archived_at.is_null()).distinct())
    archived = {u.id for u in User.select(User.id).where(User.archived_at.is_null(False))}
    return {t.identity for t in live} | (set(env_identities) - archived)


def ensure_user(identity: str, display_name: str | None = None, is_admin: bool = False,
                is_agent: bool = False) -> User:
    user = User.get_or_none(User.id == identity)
    if user is None:
        now = to_db(db.now())
        user = User.create(id=identity, display_name=(display_name or identity)[:100], is_admin=is_admin,
                           is_agent=is_agent, created_at=now, updated_at=now)
    return user


def user_json(user: User) -> JSONObject:
    return {"id": user.id, "displayName": user.display_name, "isAdmin": user.is_admin, "isAgent": user.is_agent,
            "avatarUrl": user.avatar_url, "createdAt": iso(user.created_at), "updatedAt": iso(user.updated_at),
            "lastSeenAt": iso(user.last_seen_at), "archivedAt": iso(user.archived_at)}


# The environment admin (SERVICE_ADMIN_TOKEN) is an operator, not a user: never listed, though
# presence keeps a users row for it like for anyone who calls.
UNLISTED = "admin"


def list_users(env_identities: frozenset[str]) -> list[JSONObject]:
    can_act = actors(env_identities) - {UNLISTED}
    users = [u for u in User.select().where(User.archived_at.is_null() & (User.id != UNLISTED))
             .order_by(User.display_name, User.id) if u.id in can_act]
    listed = {u.id for u in User.select(User.id)}
    rows = [user_json(u) for u in users]
    for identity in sorted(can_act - listed):
        rows.append({"id": identity, "displayName": identity, "isAdmin": False, "isAgent": False,
                     "avatarUrl": None, "createdAt": None, "updatedAt": None, "lastSeenAt": None,
                     "archivedAt": None})
    return rows


# --- tokens ----------------------------------------------------------------------------------

def token_by_hash(digest: str) -> Token | None:
    return Token.get_or_none(Token.token_hash == digest)


def touch_token(token_id: int) -> None:
    Token.update(last_used_at=to_db(db.now())).where(Token.id == token_id).execute()


def issue_token(identity: str, is_admin: bool, label: str | None, created_by: str | None,
                expires_at: datetime | None = None, is_agent: bool | None = None) -> tuple[Token, str]:
    """Creates a database token (and the user, if new). Returns the row and the only plaintext copy.
    `is_agent` (None: unchanged, human for a new user) sets the identity's kind (who is who)."""
    user = ensure_user(identity, is_admin=is_admin, is_agent=bool(is_agent))
    if is_agent is not None and user.is_agent != is_agent:
        User.update(is_agent=is_agent, updated_at=to_db(db.now())).where(User.id == identity).execute()
    plaintext = new_token()
    token = Token.create(identity=identity, token_hash=hash_token(plaintext), is_admin=is_admin,
                         label=(label or None) and label[:100], created_by=created_by,
                         created_at=to_db(db.now()), expires_at=to_db(expires_at))
    return token, plaintext


def _webhook_of(identity: str, lock: bool = False) -> WebhookConfig | None:
    query = WebhookConfig.select().where(WebhookConfig.identity == identity)
    config: WebhookConfig | None = (db.locked(query) if lock else query).first()
    return config


def token_json(token: Token, webhook: WebhookConfig | None = None) -> JSONObject:
    secret = webhook.token if webhook else None
    return {"id": token.id, "identity": token.identity, "isAdmin": token.is_admin, "label": token.label,
            "createdBy": token.created_by, "createdAt": iso(token.created_at), "expiresAt": iso(token.expires_at),
            "lastUsedAt": iso(token.last_used_at), "revokedAt": iso(token.revoked_at),
            "webhookToken": f"…{secret[-4:]}" if secret else None,
            "webhookUrl": webhook.url if webhook else None,
            "backupAgent": token.backup_agent, "staleTriggerHours": token.stale_trigger_hours}


def list_tokens() -> list[JSONObject]:
    tokens = list(Token.select().order_by(Token.created_at.desc(), Token.id.desc()).limit(100))
    hooks = {w.identity: w for w in WebhookConfig.select().where(
        WebhookConfig.identity.in_({t.identity for t in tokens}))} if tokens else {}
    return [token_json(t, hooks.get(t.identity)) for t in tokens]


def _token(token_id: int) -> Token:
    """The row, locked for the unit: revoke, rotate and PATCH each write the whole row."""
    token: Token | None = db.locked(Token.select().where(Token.id == token_id)).first()
    if token is None:
        raise NotFound("Token not found")
    return token


def tokens_changed(token_ids: Iterable[int], identity: str | None = None) -> None:
    """Once this unit commits, every process drops these tokens (with `identity`: all of that
    identity's) from its token cache (auth.TokenResolver): this one before the unit's caller hears
    back, the others when the bus's NOTIFY reaches them."""
    dropped: TokensPayload = {"tokenIds": sorted(set(token_ids)), "identity": identity}
    db.after_commit(TOKENS, dropped)


def log_revocation(token_ids: Collection[int], identity: str, reason: str, whole_identity: bool = False) -> int:
    """Log that these tokens (with `whole_identity`: every connection of `identity`, environment
    tokens included) must no longer be served. A control event: no audience, so no stream, resume or
    webhook ever carries it; every process's SSE hub reads it from the log and closes the streams and
    sockets opened with those tokens and drops them from its token cache (realtime/revocation.py)."""
    assert reason in REVOCATION_REASONS
    data = {"tokenIds": sorted(set(token_ids)), "identity": identity, "reason": reason,
            "wholeIdentity": whole_identity}
    event_id = event_log.append(REVOCATION_EVENT, data, to=())
    control: ControlPayload = {"eventId": event_id}
    db.after_commit(CONTROL, control)  # SQLite's hub skips reads with no stream open
    tokens_changed(token_ids, identity if whole_identity else None)
    return event_id


def revoke_token(token_id: int) -> JSONObject:
    token = _token(token_id)
    if token.revoked_at is None:
        token.revoked_at = to_db(db.now())
        token.save()
        log_revocation([token.id], token.identity, "revoked")
    return token_json(token, _webhook_of(token.identity))


def revoke_identity_tokens(identity: str, reason: str = "archived") -> list[int]:
    """Revoke every database token of `identity` and end all its open streams and sockets (archiving)."""
    now = to_db(db.now())
    ids = [t.id for t in db.locked(Token.select(Token.id).where(
        (Token.identity == identity) & Token.revoked_at.is_null()))]
    if ids:
        Token.update(revoked_at=now).where(Token.id.in_(ids)).execute()
    log_revocation(ids, identity, reason, whole_identity=True)
    return ids


def rotate_token(token_id: int, caller: Principal) -> JSONObject:
    token = _token(token_id)
    if not caller.is_admin and caller.identity != token.identity:
        raise Forbidden("Only an admin or the token's own identity may rotate it")
    if token.revoked_at is not None:
        raise Invalid("Token is already revoked")
    token.revoked_at = to_db(db.now())
    token.save()
    log_revocation([token.id], token.identity, "rotated")
    fresh, plaintext = issue_token(token.identity, token.is_admin, f"Rotated from token #{token.id}",
                                   caller.identity, None)
    fresh.backup_agent, fresh.stale_trigger_hours = token.backup_agent, token.stale_trigger_hours
    fresh.save()
    return {"previousTokenId": token.id,
            "newToken": {"id": fresh.id, "identity": fresh.identity, "token": plaintext, "isAdmin": fresh.is_admin},
            "message": ROTATE_NOTICE}


def update_token(token_id: int, changes: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    token = _token(token_id)
    if "backupAgent" in changes:
        agent = changes["backupAgent"]
        if agent is not None:
            agent = valid_identity(agent)
            if not is_known(agent, env_identities):
                raise Invalid(f"Unknown identity: {agent}")
            if agent == token.identity:
                raise Invalid("An agent cannot be its own backup")
        for backup in {token.backup_agent, agent} - {None}:  # backup alerts join or leave their wakes
            changed: WakeChangedPayload = {"identity": backup}
            db.after_commit(WAKE_CHANGED, changed)
        token.backup_agent = agent
    if "staleTriggerHours" in changes:
        hours = changes["staleTriggerHours"]
        if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= STALE_HOURS_MAX:
            raise Invalid("staleTriggerHours must be an integer of at least 1")
        token.stale_trigger_hours = hours
    if "label" in changes:
        token.label = optional_label(changes["label"])
    token.save()
    return token_json(token, _webhook_of(token.identity))


# --- invites ---------------------------------------------------------------------------------

def invite_json(invite: Invite) -> JSONObject:
    return {"id": invite.id, "code": invite.code, "createdBy": invite.created_by,
            "identityHint": invite.identity_hint, "isAdmin": invite.is_admin, "maxUses": invite.max_uses,
            "useCount": invite.use_count, "expiresAt": iso(invite.expires_at), "createdAt": iso(invite.created_at),
            "webhookToken": invite.webhook_token, "isAgent": invite.is_agent}


def create_invite(created_by: str, identity_hint: str | None, is_admin: bool, max_uses: int,
                  expires_in_hours: float, is_agent: bool | None = None) -> JSONObject:
    """`is_agent`: the kind its registrations get (None: as each registrant says, human by default)."""
    now = db.now()
    invite = Invite.create(code=secrets.token_hex(24), created_by=created_by, identity_hint=identity_hint,
                           is_admin=is_admin, is_agent=is_agent, max_uses=max_uses, use_count=0,
                           expires_at=to_db(now + timedelta(hours=expires_in_hours)), created_at=to_db(now))
    return invite_json(invite)


def list_invites() -> list[JSONObject]:
    return [invite_json(i) for i in Invite.select().order_by(Invite.created_at.desc(), Invite.id.desc()).limit(50)]


def delete_invite(invite_id: int) -> None:
    if Invite.delete().where(Invite.id == invite_id).execute() == 0:
        raise NotFound("Invite not found")


def name_state(identity: str, env_identities: frozenset[str]) -> str | None:
    """Which state a name is in (the onboarding skill page's lifecycle), or None for a free name:
    `environment` (an environment token's, or the operator `admin`), `archived`, `live` (an unrevoked,
    unexpired token), `dormant` (a users row or tokens, none live: revoked, expired, or unarchived
    and not yet restored). The user row is locked: two registrations of one name serialise on it."""
    if identity == UNLISTED or identity in env_identities:
        return "environment"
    user = db.locked(User.select(User.id, User.archived_at).where(User.id == identity)).first()
    if user is not None and user.archived_at is not None:
        return "archived"
    if Token.select().where((Token.identity == identity) & Token.revoked_at.is_null()
                            & (Token.expires_at.is_null() | (Token.expires_at > to_db(db.now())))).exists():
        return "live"
    if user is not None or Token.select().where(Token.identity == identity).exists():
        return "dormant"
    return None


def _claimable(identity: str, named_by_invite: bool, env_identities: frozenset[str]) -> bool:
    """A name is never reissued: registering one that exists in any state is 409, except that an
    invite naming a dormant identity (an admin unarchived it, or its tokens were revoked) restores it.
    Returns whether this registration restores an existing identity."""
    state = name_state(identity, env_identities)
    if state is None:
        return False
    if state == "dormant" and named_by_invite:
        return True
    hint = " (unarchive it, then create an invite naming it)" if state == "archived" else ""
    raise Conflict(f"Identity '{identity}' already exists{hint}")


def register(code: object, identity: object, label: object, display_name: object,
             env_identities: frozenset[str], is_agent: bool | None = None) -> JSONObject:
    """Redeem an invite code (POST /api/auth/register and the /onboard form): the identity and its token.
    Its kind: the invite's when the invite names one, else `is_agent` as the registrant says, else human."""
    if not isinstance(code, str) or not code.strip():
        raise Invalid("code is required")
    if identity is None or (isinstance(identity, str) and not identity.strip()):
        raise Invalid("identity is required")
    display_name = display_name or None
    identity = valid_identity(identity)
    label = optional_label(label or None)
    if display_name is not None and (not isinstance(display_name, str) or len(display_name) > 100):
        raise Invalid("displayName must be a string of at most 100 characters")
    # Claim a use atomically: of two racing registrations on a one-use invite, one wins.
    now = to_db(db.now())
    invite = Invite.get_or_none(Invite.code == code.strip())
    if invite is None:
        raise Forbidden("Invite code is unknown")
    if invite.expires_at is not None and from_db(invite.expires_at) <= from_db(now):
        raise Forbidden("Invite has expired")
    if invite.use_count >= invite.max_uses:
        raise Forbidden("Invite has been used up")
    if invite.identity_hint and invite.identity_hint != identity:
        raise Invalid(f"This invite is for the identity '{invite.identity_hint}'")
    restoring = _claimable(identity, invite.identity_hint == identity, env_identities)
    if not restoring:  # a new identity's display name (its id when none is given) reads as nobody else's
        require_own_name(identity, display_name or identity, env_identities)
    claimed = (Invite.update(use_count=Invite.use_count + 1)
               .where((Invite.id == invite.id) & (Invite.use_count < Invite.max_uses)).execute())
    if not claimed:
        raise Forbidden("Invite has been used up")
    kind = invite.is_agent if invite.is_agent is not None else is_agent
    if restoring:  # the invite is the admin's grant now: the row's old flag must not outlive it
        restored: dict[str, object] = {"is_admin": invite.is_admin, "updated_at": now}
        if kind is not None:
            restored["is_agent"] = kind
        User.update(**restored).where(User.id == identity).execute()
    elif not (User.insert(id=identity, display_name=(display_name or identity)[:100], is_admin=invite.is_admin,
                          is_agent=bool(kind), created_at=now, updated_at=now).on_conflict_ignore().as_rowcount().execute()):
        raise Conflict(f"Identity '{identity}' already exists")  # a concurrent registration won the name
    token, plaintext = issue_token(identity, invite.is_admin, label or "Onboarded via invite", invite.created_by)
    agent = bool(User.select(User.is_agent).where(User.id == identity).scalar())
    return {"identity": identity, "token": plaintext, "isAdmin": token.is_admin, "isAgent": agent,
            "message": REGISTER_NOTICE}


# --- webhook config --------------------------------------------------------------------------

def webhook_state(identity: str, override: tuple[str, str] | None) -> JSONObject:
    config = _webhook_of(identity)
    url = override[0] if override else (config.url if config else None)
    counts: dict[str, int] = dict(db.tuples(PushDelivery.select(PushDelivery.status, pw.fn.COUNT(PushDelivery.id))
                                            .where(PushDelivery.identity == identity).group_by(PushDelivery.status)))
    last_ok = (PushDelivery.select(pw.fn.MAX(PushDelivery.delivered_at))
               .where((PushDelivery.identity == identity) & (PushDelivery.status == "delivered")).scalar())
    last_error = (PushDelivery.select(PushDelivery.last_error)
                  .where((PushDelivery.identity == identity) & PushDelivery.last_error.is_null(False))
                  .order_by(PushDelivery.created_at.desc()).limit(1).scalar())
    return {"identity": identity, "webhookUrl": url, "configured": bool(url),
            "deliveries": {"pending": counts.get("pending", 0), "failed": counts.get("failed", 0),
                           "lastSuccessAt": iso(last_ok), "lastError": last_error}}


def set_webhook(identity: str, url: str | None, token: str | None) -> JSONObject:
    config = _webhook_of(identity, lock=True)
    now = to_db(db.now())
    if url is None:
        if config is not None:
            config.url, config.updated_at = None, now
            config.save()
        return {"ok": True, "identity": identity, "webhookUrl": None, "message": "Webhook cleared"}
    secret = token or (config.token if config and config.token else None) or secrets.token_hex(32)
    generated = token is None and (config is None or not config.token)
    if config is None:
        try:
            with db.current_database().atomic():
                WebhookConfig.create(identity=identity, url=url, token=secret, updated_at=now)
        except pw.IntegrityError:  # a concurrent first registration won: update the row it made
            return set_webhook(identity, url, token)
    else:
        config.url, config.token, config.updated_at = url, secret, now
        config.save()
    result = {"ok": True, "identity": identity, "webhookUrl": url, "message": "Webhook registered"}
    if generated:
        result["webhookToken"] = secret
    return result


def unread_count(identity: str) -> int:
    return Message.select().where((Message.recipient == identity) & (Message.status == "unread")).count()
