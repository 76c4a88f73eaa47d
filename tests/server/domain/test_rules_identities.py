"""domain/identities.py's rules through the store, no HTTP (over HTTP: tests/server/api/test_auth.py,
test_identity_lifecycle.py, test_webhook_secrets.py, test_users.py): which names are valid, known, archived
and able to act; what the user and token lists show; revoking and rotating (and what every process is told);
invites and registration with each refusal in words; webhook settings and their delivery state.
Fast: the mutation run of identities.py uses these with test_rules_users.py."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver import db
from coordserver.domain import identities
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events.channels import CONTROL, TOKENS, WAKE_CHANGED
from coordserver.models import Event, Invite, Message, PushDelivery, Token, User, WebhookConfig
from coordserver.principal import Principal, hash_token
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START, while_held

ENV = frozenset({"envy", "admin"})
NOW = to_db(START)


def run(store, fn, *args):
    return store.run_sync(fn, *args)


def issue(store, identity: str, is_admin: bool = False, label: str | None = "agent", expires_at=None) -> Token:
    return run(store, identities.issue_token, identity, is_admin, label, "admin", expires_at)[0]


def user(store, identity: str, archived: bool = False, display: str | None = None) -> None:
    run(store, lambda: User.create(id=identity, display_name=display or identity, is_admin=False, is_agent=False,
                                   created_at=NOW, updated_at=NOW, archived_at=NOW if archived else None))


def revoked(store, token_id: int) -> None:
    run(store, lambda: Token.update(revoked_at=NOW).where(Token.id == token_id).execute())


def events(store) -> list[tuple]:
    return run(store, lambda: [(e.type, e.data, e.to_all) for e in Event.select().order_by(Event.id)])


# --- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, identity", [(" Ann_1 ", "ann_1"), ("a", "a"), ("B-2", "b-2"), ("a" * 50, "a" * 50)])
def test_a_valid_identity_is_lowered(value, identity):
    assert identities.valid_identity(value) == identity


@pytest.mark.parametrize("value, message", [
    (None, "identity is required"), (5, "identity is required"), ("   ", "identity is required"),
    ("a" * 51, "identity must match ^[a-z][a-z0-9_-]*$ and be at most 50 characters"),
    ("1ann", "identity must match ^[a-z][a-z0-9_-]*$ and be at most 50 characters"),
    ("an n", "identity must match ^[a-z][a-z0-9_-]*$ and be at most 50 characters"),
])
def test_an_invalid_identity_says_why(value, message):
    with pytest.raises(Invalid) as refused:
        identities.valid_identity(value)
    assert refused.value.message == message


def test_labels():
    assert identities.optional_label(None) is None
    assert identities.optional_label("x" * 100) == "x" * 100
    for bad in ("x" * 101, 5):
        with pytest.raises(Invalid) as refused:
            identities.optional_label(bad)
        assert refused.value.message == "label must be a string of at most 100 characters"


def test_who_is_known_archived_and_able_to_act(store):
    user(store, "uma")                     # a users row, no token
    user(store, "arch", archived=True)     # archived
    user(store, "envy", archived=True)     # an environment identity, archived
    issue(store, "tok")                    # a live token (and its users row)
    revoked(store, issue(store, "gone").id)  # only a revoked token
    issue(store, "old", expires_at=START - timedelta(seconds=1))  # only an expired token
    issue(store, "later", expires_at=START + timedelta(seconds=1))
    issue(store, "now", expires_at=START)  # expires this instant: no longer acts
    run(store, lambda: Token.create(identity="rowless", token_hash=hash_token("rowless"), is_admin=False,
                                    created_at=NOW))  # a token without a users row
    arch_token = issue(store, "arch2")
    run(store, lambda: User.update(archived_at=NOW).where(User.id == "arch2").execute())
    assert arch_token.revoked_at is None

    known = {"uma", "tok", "gone", "old", "later", "now", "rowless", "admin"}
    assert run(store, identities.known_identities, ENV) == known
    for identity in ("uma", "tok", "gone", "old", "later", "now", "rowless", "admin", "arch", "envy", "arch2",
                     "nobody"):
        assert run(store, identities.is_known, identity, ENV) is (identity in known), identity
        # the rule as SQL over parameters (what a guarded insert embeds), the default placeholders
        params = identities.known_params(identity, ENV)
        assert bool(run(store, db.sql_rows, "SELECT " + identities.known_sql(), params)[0][0]) is (identity in known)
    assert run(store, identities.is_archived, "arch") is True
    assert run(store, identities.is_archived, "uma") is False
    assert run(store, identities.is_archived, "nobody") is False
    assert run(store, identities.archived_among, ["arch", "uma", "envy", "nobody"]) == {"arch", "envy"}
    assert run(store, identities.archived_among, []) == set()
    # acting needs a live token and no archive, or an environment token
    assert run(store, identities.actors, ENV) == {"tok", "later", "admin"}
    assert identities.user_json(run(store, User.get_by_id, "arch"))["archivedAt"] == iso(NOW)


def test_the_user_list(store):
    issue(store, "zed")
    run(store, lambda: User.update(display_name="Alpha", is_agent=True, avatar_url="https://a/z.png",
                                   last_seen_at=NOW).where(User.id == "zed").execute())
    issue(store, "bea")
    run(store, lambda: User.update(display_name="Alpha").where(User.id == "bea").execute())
    issue(store, "carl")
    issue(store, "admin", is_admin=True)   # the operator: never listed
    issue(store, "dora")
    run(store, lambda: User.update(archived_at=NOW).where(User.id == "dora").execute())
    revoked(store, issue(store, "eve").id)
    user(store, "uma")
    listed = run(store, identities.list_users, frozenset({"envy", "admin", "ann"}))
    stamp = iso(NOW)
    assert listed == [
        {"id": "bea", "displayName": "Alpha", "isAdmin": False, "isAgent": False, "avatarUrl": None,
         "createdAt": stamp, "updatedAt": stamp, "lastSeenAt": None, "archivedAt": None},
        {"id": "zed", "displayName": "Alpha", "isAdmin": False, "isAgent": True, "avatarUrl": "https://a/z.png",
         "createdAt": stamp, "updatedAt": stamp, "lastSeenAt": stamp, "archivedAt": None},
        {"id": "carl", "displayName": "carl", "isAdmin": False, "isAgent": False, "avatarUrl": None,
         "createdAt": stamp, "updatedAt": stamp, "lastSeenAt": None, "archivedAt": None},
        *[{"id": name, "displayName": name, "isAdmin": False, "isAgent": False, "avatarUrl": None, "createdAt": None,
           "updatedAt": None, "lastSeenAt": None, "archivedAt": None} for name in ("ann", "envy")]]


def test_ensure_user_makes_a_row_once(store):
    made = run(store, identities.ensure_user, "fay", "F" * 120, True, True)
    assert (made.display_name, made.is_admin, made.is_agent) == ("F" * 100, True, True)
    again = run(store, identities.ensure_user, "fay", "Other", False, False)
    assert (again.display_name, again.is_admin, again.is_agent) == ("F" * 100, True, True)
    plain = run(store, identities.ensure_user, "gil")
    assert (plain.display_name, plain.is_admin, plain.is_agent, plain.created_at) == ("gil", False, False, NOW)


# --- tokens --------------------------------------------------------------------------------------

def test_an_issued_token_is_stored_hashed_and_found_by_its_hash(store):
    token, plaintext = run(store, identities.issue_token, "hal", True, "x" * 120, "root",
                           START + timedelta(days=1))
    assert len(plaintext) == 64 and token.token_hash == hash_token(plaintext)
    found = run(store, identities.token_by_hash, hash_token(plaintext))
    assert (found.id, found.identity, found.is_admin, found.label, found.created_by, found.created_at,
            found.expires_at) == (token.id, "hal", True, "x" * 100, "root", NOW, to_db(START + timedelta(days=1)))
    assert run(store, identities.token_by_hash, hash_token("other")) is None
    assert run(store, lambda: User.get_by_id("hal").is_admin) is True
    assert issue(store, "hal", label="").label is None
    store.clock.advance(minutes=3)
    run(store, identities.touch_token, token.id)
    assert run(store, lambda: Token.get_by_id(token.id).last_used_at) == to_db(START + timedelta(minutes=3))
    assert run(store, lambda: Token.get_by_id(found.id + 1).last_used_at) is None


def test_the_token_list_shows_each_webhook_secret_by_its_last_four_characters(store):
    first = issue(store, "ivy")
    run(store, lambda: Token.update(backup_agent="bob", stale_trigger_hours=5, last_used_at=NOW)
        .where(Token.id == first.id).execute())
    store.clock.advance(seconds=1)
    second = issue(store, "jay", label=None, expires_at=START + timedelta(days=2))
    run(store, identities.set_webhook, "ivy", "https://hooks.example/ivy", "secret-ivy-1234")
    run(store, lambda: WebhookConfig.create(identity="jay", url=None, token="", updated_at=NOW))
    listed = run(store, identities.list_tokens)
    assert listed == [
        {"id": second.id, "identity": "jay", "isAdmin": False, "label": None, "createdBy": "admin",
         "createdAt": iso(to_db(START + timedelta(seconds=1))),
         "expiresAt": iso(to_db(START + timedelta(days=2))), "lastUsedAt": None,
         "revokedAt": None, "webhookToken": None, "webhookUrl": None, "backupAgent": None,
         "staleTriggerHours": 4},
        {"id": first.id, "identity": "ivy", "isAdmin": False, "label": "agent", "createdBy": "admin",
         "createdAt": iso(NOW), "expiresAt": None, "lastUsedAt": iso(NOW), "revokedAt": None,
         "webhookToken": "…1234", "webhookUrl": "https://hooks.example/ivy", "backupAgent": "bob",
         "staleTriggerHours": 5}]


def test_tokens_and_invites_are_listed_by_creation_time(store):
    """Newest first by when they were made, even when the clock stepped back between two (ids disagree)."""
    store.clock.advance(hours=1)
    later = issue(store, "lia")
    later_invite = run(store, identities.create_invite, "root", None, False, 1, 1)["id"]
    store.clock.advance(hours=-2)
    earlier = issue(store, "lia")
    earlier_invite = run(store, identities.create_invite, "root", None, False, 1, 1)["id"]
    assert earlier.id > later.id and earlier_invite > later_invite
    assert [t["id"] for t in run(store, identities.list_tokens)] == [later.id, earlier.id]
    assert [i["id"] for i in run(store, identities.list_invites)] == [later_invite, earlier_invite]


def test_the_token_list_is_the_newest_hundred(store):
    assert run(store, identities.list_tokens) == []
    ids = run(store, lambda: [identities.issue_token(f"t{n}", False, None, "admin")[0].id for n in range(101)])
    assert [t["id"] for t in run(store, identities.list_tokens)] == sorted(ids, reverse=True)[:100]


async def test_revoking_a_token_is_logged_and_announced_once(store):
    token = issue(store, "kim")
    run(store, identities.set_webhook, "kim", "https://h/kim", "kims-secret-9876")
    record = await store.write(identities.revoke_token, token.id)
    assert record["revokedAt"] == iso(NOW) and record["id"] == token.id
    assert (record["webhookUrl"], record["webhookToken"]) == ("https://h/kim", "…9876")
    again = await store.write(identities.revoke_token, token.id)
    assert again == record
    assert events(store) == [("token_revoked", {"tokenIds": [token.id], "identity": "kim", "reason": "revoked",
                                                "wholeIdentity": False}, False)]
    event_id = run(store, lambda: Event.select().first().id)
    assert run(store, lambda: Event.select().first().created_at) == NOW
    assert store.published == [(CONTROL, {"eventId": event_id}), (TOKENS, {"tokenIds": [token.id], "identity": None})]
    with pytest.raises(NotFound) as missing:
        await store.write(identities.revoke_token, token.id + 100)
    assert missing.value.message == "Token not found"


async def test_revoking_an_identitys_tokens_ends_all_of_them(store):
    live, other = issue(store, "lou"), issue(store, "lou")
    old = issue(store, "lou")
    revoked(store, old.id)
    kept = issue(store, "max")
    store.clock.advance(minutes=1)
    assert await store.write(identities.revoke_identity_tokens, "lou", "archived") == [live.id, other.id]
    assert run(store, lambda: {t.id: t.revoked_at for t in Token.select()}) == {
        live.id: to_db(START + timedelta(minutes=1)), other.id: to_db(START + timedelta(minutes=1)), old.id: NOW,
        kept.id: None}
    assert events(store) == [("token_revoked", {"tokenIds": [live.id, other.id], "identity": "lou",
                                                "reason": "archived", "wholeIdentity": True}, False)]
    assert store.published[1:] == [(TOKENS, {"tokenIds": [live.id, other.id], "identity": "lou"})]
    # an identity without database tokens (environment) still has its connections ended
    assert await store.write(identities.revoke_identity_tokens, "envy") == []
    assert events(store)[-1] == ("token_revoked", {"tokenIds": [], "identity": "envy", "reason": "archived",
                                                   "wholeIdentity": True}, False)
    with pytest.raises(AssertionError):
        await store.write(identities.log_revocation, [1], "lou", "deleted")


async def test_rotating_keeps_the_settings_and_revokes_the_old_token(store):
    token = issue(store, "ned", is_admin=True)
    run(store, lambda: Token.update(backup_agent="bob", stale_trigger_hours=7).where(Token.id == token.id).execute())
    with pytest.raises(Forbidden) as refused:
        await store.write(identities.rotate_token, token.id, Principal("bob", False))
    assert refused.value.message == "Only an admin or the token's own identity may rotate it"
    rotated = await store.write(identities.rotate_token, token.id, Principal("ned", False))
    fresh = rotated["newToken"]
    assert rotated == {"previousTokenId": token.id, "message": identities.ROTATE_NOTICE,
                       "newToken": {"id": fresh["id"], "identity": "ned", "token": fresh["token"], "isAdmin": True}}
    row = run(store, identities.token_by_hash, hash_token(fresh["token"]))
    assert (row.id, row.label, row.created_by, row.backup_agent, row.stale_trigger_hours, row.is_admin) == \
        (fresh["id"], f"Rotated from token #{token.id}", "ned", "bob", 7, True)
    assert run(store, lambda: Token.get_by_id(token.id).revoked_at) == NOW
    assert events(store) == [("token_revoked", {"tokenIds": [token.id], "identity": "ned", "reason": "rotated",
                                                "wholeIdentity": False}, False)]
    with pytest.raises(Invalid) as refused:
        await store.write(identities.rotate_token, token.id, Principal("root", True))
    assert refused.value.message == "Token is already revoked"
    by_admin = await store.write(identities.rotate_token, fresh["id"], Principal("root", True))
    assert run(store, identities.token_by_hash, hash_token(by_admin["newToken"]["token"])).created_by == "root"


async def test_a_backup_change_reaches_both_backups_wakes(store):
    token = issue(store, "oz")
    run(store, identities.set_webhook, "oz", "https://h/oz", "ozs-secret-4321")
    first = await store.write(identities.update_token, token.id, {"backupAgent": "Bob"}, frozenset({"bob", "carol"}))
    assert (first["webhookUrl"], first["webhookToken"]) == ("https://h/oz", "…4321")
    assert store.published == [(WAKE_CHANGED, {"identity": "bob"})]
    store.published.clear()
    record = await store.write(identities.update_token, token.id,
                               {"backupAgent": "carol", "staleTriggerHours": 2**31 - 1}, frozenset({"bob", "carol"}))
    assert sorted(p["identity"] for _, p in store.published) == ["bob", "carol"]
    assert (record["backupAgent"], record["staleTriggerHours"]) == ("carol", 2**31 - 1)
    store.published.clear()
    record = await store.write(identities.update_token, token.id, {"backupAgent": None, "label": "L"}, frozenset())
    assert store.published == [(WAKE_CHANGED, {"identity": "carol"})]
    assert (record["backupAgent"], record["label"]) == (None, "L")
    for hours in (2**31, 1.5, "3"):
        with pytest.raises(Invalid):
            await store.write(identities.update_token, token.id, {"staleTriggerHours": hours}, frozenset())
    assert (await store.write(identities.update_token, token.id, {"staleTriggerHours": 1}, frozenset()))[
        "staleTriggerHours"] == 1


# --- invites and registration --------------------------------------------------------------------

def test_invites_are_made_listed_newest_first_and_deleted(store):
    made = run(store, identities.create_invite, "root", "pat", True, 3, 1.5)
    assert made == {"id": made["id"], "code": made["code"], "createdBy": "root", "identityHint": "pat",
                    "isAdmin": True, "isAgent": None, "maxUses": 3, "useCount": 0,
                    "expiresAt": iso(to_db(START + timedelta(hours=1.5))),
                    "createdAt": iso(NOW), "webhookToken": None}
    assert len(made["code"]) == 48
    more = [run(store, identities.create_invite, "root", None, False, 1, 1)["id"] for _ in range(50)]
    assert [i["id"] for i in run(store, identities.list_invites)] == sorted([made["id"], *more], reverse=True)[:50]
    run(store, identities.delete_invite, made["id"])
    assert sorted(i["id"] for i in run(store, identities.list_invites)) == sorted(more)[-50:]
    assert run(store, lambda: Invite.select().count()) == 50
    with pytest.raises(NotFound) as missing:
        run(store, identities.delete_invite, made["id"])
    assert missing.value.message == "Invite not found"


def invite(store, hint=None, is_admin=False, max_uses=1, hours=1.0) -> str:
    return run(store, identities.create_invite, "root", hint, is_admin, max_uses, hours)["code"]


def register(store, code, identity, label=None, display=None, env=ENV):
    return run(store, identities.register, code, identity, label, display, env)


def test_each_state_of_a_name(store):
    issue(store, "live")
    revoked(store, issue(store, "dormant").id)
    issue(store, "expired", expires_at=START)
    issue(store, "expiring", expires_at=START + timedelta(seconds=1))
    user(store, "rowonly")
    user(store, "arch", archived=True)
    run(store, lambda: Token.create(identity="tokonly", token_hash="h", is_admin=False, created_at=NOW,
                                    revoked_at=NOW))
    states = {name: run(store, identities.name_state, name, ENV)
              for name in ("admin", "envy", "arch", "live", "expiring", "dormant", "expired", "rowonly", "tokonly",
                           "free")}
    assert states == {"admin": "environment", "envy": "environment", "arch": "archived", "live": "live",
                      "expiring": "live",
                      "dormant": "dormant", "expired": "dormant", "rowonly": "dormant", "tokonly": "dormant",
                      "free": None}
    assert run(store, identities.name_state, "admin", frozenset()) == "environment"  # the operator, always


def test_registering_a_new_name(store):
    code = invite(store, is_admin=True, max_uses=2)
    made = register(store, f"  {code} ", " Quinn ", None, "Q. Uinn")
    assert made == {"identity": "quinn", "token": made["token"], "isAdmin": True, "isAgent": False,
                    "message": identities.REGISTER_NOTICE}
    row = run(store, identities.token_by_hash, hash_token(made["token"]))
    assert (row.identity, row.is_admin, row.label, row.created_by) == ("quinn", True, "Onboarded via invite", "root")
    quinn = run(store, User.get_by_id, "quinn")
    assert (quinn.display_name, quinn.is_admin, quinn.is_agent, quinn.created_at) == ("Q. Uinn", True, False, NOW)
    other = invite(store, max_uses=3)
    second = register(store, code, "rae", "laptop", "")
    assert run(store, identities.token_by_hash, hash_token(second["token"])).label == "laptop"
    assert run(store, User.get_by_id, "rae").display_name == "rae"
    assert run(store, lambda: Invite.get(Invite.code == code).use_count) == 2
    assert run(store, lambda: Invite.get(Invite.code == other).use_count) == 0  # only the invite used counts
    for identity in ("sam", "quinn"):  # used up comes first, before the name is judged
        with pytest.raises(Forbidden) as refused:
            register(store, code, identity)
        assert refused.value.message == "Invite has been used up"
    assert register(store, other, "tia", None, "T" * 100)["identity"] == "tia"
    assert run(store, User.get_by_id, "tia").display_name == "T" * 100


@pytest.mark.parametrize("code, identity, label, display, error, message", [
    (None, "sam", None, None, Invalid, "code is required"),
    ("  ", "sam", None, None, Invalid, "code is required"),
    ("CODE", None, None, None, Invalid, "identity is required"),
    ("CODE", "  ", None, None, Invalid, "identity is required"),
    ("CODE", "9sam", None, None, Invalid, "identity must match ^[a-z][a-z0-9_-]*$ and be at most 50 characters"),
    ("CODE", "sam", "x" * 101, None, Invalid, "label must be a string of at most 100 characters"),
    ("CODE", "sam", None, "x" * 101, Invalid, "displayName must be a string of at most 100 characters"),
    ("CODE", "sam", None, 7, Invalid, "displayName must be a string of at most 100 characters"),
    ("unknown", "sam", None, None, Forbidden, "Invite code is unknown"),
    ("CODE", "live", None, None, Conflict, "Identity 'live' already exists"),
    ("CODE", "envy", None, None, Conflict, "Identity 'envy' already exists"),
    ("CODE", "arch", None, None, Conflict,
     "Identity 'arch' already exists (unarchive it, then create an invite naming it)"),
    ("CODE", "dormant", None, None, Conflict, "Identity 'dormant' already exists"),
])
def test_a_refused_registration_says_why_and_uses_nothing(store, code, identity, label, display, error, message):
    issue(store, "live")
    revoked(store, issue(store, "dormant").id)
    user(store, "arch", archived=True)
    real = invite(store)
    with pytest.raises(error) as refused:
        register(store, real if code == "CODE" else code, identity, label, display)
    assert refused.value.message == message
    assert run(store, lambda: Invite.get(Invite.code == real).use_count) == 0
    assert run(store, lambda: User.get_or_none(User.id == "sam")) is None


def test_an_invite_expires_on_the_instant_and_names_its_identity(store):
    code = invite(store, hours=1)
    store.clock.advance(hours=1, microseconds=-1)
    hinted = invite(store, hint="tess")
    with pytest.raises(Invalid) as refused:
        register(store, hinted, "tom")
    assert refused.value.message == "This invite is for the identity 'tess'"
    assert register(store, hinted, "tess")["identity"] == "tess"
    store.clock.advance(microseconds=1)
    with pytest.raises(Forbidden) as refused:
        register(store, code, "uli")
    assert refused.value.message == "Invite has expired"


def test_an_invite_naming_a_dormant_identity_restores_it_with_the_invites_rights(store):
    old = issue(store, "vic", is_admin=True)
    revoked(store, old.id)
    issue(store, "wendy")
    run(store, lambda: User.update(display_name="Victor").where(User.id == "vic").execute())
    store.clock.advance(minutes=5)
    restored = register(store, invite(store, hint="vic", is_admin=False), "vic", None, "New Name")
    assert restored["isAdmin"] is False
    vic = run(store, User.get_by_id, "vic")
    assert (vic.is_admin, vic.display_name, vic.updated_at) == (False, "Victor", to_db(START + timedelta(minutes=5)))
    revoked(store, run(store, identities.token_by_hash, hash_token(restored["token"])).id)
    assert register(store, invite(store, hint="vic", is_admin=True), "vic")["isAdmin"] is True
    assert run(store, User.get_by_id, "vic").is_admin is True
    assert run(store, User.get_by_id, "wendy").is_admin is False  # only the restored row changes


# --- webhooks ------------------------------------------------------------------------------------

def test_setting_and_clearing_a_webhook(store):
    cleared = run(store, identities.set_webhook, "wes", None, None)  # nothing to clear
    assert cleared == {"ok": True, "identity": "wes", "webhookUrl": None, "message": "Webhook cleared"}
    assert run(store, lambda: WebhookConfig.select().count()) == 0

    given = run(store, identities.set_webhook, "wes", "https://h/1", "given-secret")
    assert given == {"ok": True, "identity": "wes", "webhookUrl": "https://h/1", "message": "Webhook registered"}
    store.clock.advance(seconds=5)
    kept = run(store, identities.set_webhook, "wes", "https://h/2", None)  # the secret is kept, not echoed
    assert "webhookToken" not in kept
    row = run(store, WebhookConfig.get_by_id, "wes")
    assert (row.url, row.token, row.updated_at) == ("https://h/2", "given-secret", to_db(START + timedelta(seconds=5)))

    generated = run(store, identities.set_webhook, "xia", "https://h/3", None)
    assert len(generated["webhookToken"]) == 64
    assert run(store, WebhookConfig.get_by_id, "xia").token == generated["webhookToken"]
    replaced = run(store, identities.set_webhook, "xia", "https://h/3", "new-secret")
    assert "webhookToken" not in replaced and run(store, WebhookConfig.get_by_id, "xia").token == "new-secret"

    store.clock.advance(seconds=5)
    assert run(store, identities.set_webhook, "wes", None, None)["message"] == "Webhook cleared"
    row = run(store, WebhookConfig.get_by_id, "wes")
    assert (row.url, row.token, row.updated_at) == (None, "given-secret", to_db(START + timedelta(seconds=10)))
    # a config left without a secret gets a generated one, and says so
    run(store, lambda: WebhookConfig.update(token="").where(WebhookConfig.identity == "wes").execute())
    again = run(store, identities.set_webhook, "wes", "https://h/4", None)
    assert len(again["webhookToken"]) == 64
    assert run(store, WebhookConfig.get_by_id, "wes").token == again["webhookToken"]


def test_the_webhook_state_counts_deliveries(store):
    assert run(store, identities.webhook_state, "yan", None) == {
        "identity": "yan", "webhookUrl": None, "configured": False,
        "deliveries": {"pending": 0, "failed": 0, "lastSuccessAt": None, "lastError": None}}
    run(store, identities.set_webhook, "yan", "https://h/yan", "s")

    def delivery(status, minutes, error=None, delivered=None, identity="yan"):
        PushDelivery.create(identity=identity, event_type="message", body="{}", status=status,
                            next_attempt_at=NOW, created_at=to_db(START + timedelta(minutes=minutes)),
                            last_error=error, delivered_at=delivered and to_db(START + timedelta(minutes=delivered)))
    run(store, lambda: [delivery("pending", 1), delivery("pending", 2, "timeout"), delivery("failed", 3, "HTTP 500"),
                        delivery("delivered", 4, None, 4), delivery("delivered", 5, None, 6),
                        delivery("failed", 9, "other's", identity="zoe"),
                        delivery("delivered", 9, None, 10, identity="zoe")])
    assert run(store, identities.webhook_state, "yan", None) == {
        "identity": "yan", "webhookUrl": "https://h/yan", "configured": True,
        "deliveries": {"pending": 2, "failed": 1, "lastSuccessAt": iso(to_db(START + timedelta(minutes=6))),
                       "lastError": "HTTP 500"}}
    overridden = run(store, identities.webhook_state, "zoe", ("https://env/zoe", "t"))
    assert (overridden["webhookUrl"], overridden["configured"], overridden["deliveries"]["failed"]) == \
        ("https://env/zoe", True, 1)


def test_unread_count(store):
    def message(recipient, status):
        Message.create(recipient=recipient, sender="bob", title="t", status=status, created_at=NOW)
    run(store, lambda: [message("amy", "unread"), message("amy", "unread"), message("amy", "read"),
                        message("ben", "unread")])
    assert run(store, identities.unread_count, "amy") == 2
    assert run(store, identities.unread_count, "cal") == 0


# --- two processes on one PostgreSQL -------------------------------------------------------------

async def test_a_webhook_change_waits_for_one_in_progress_elsewhere(two_stores):
    """The row is locked for the unit: a change that keeps the secret, racing one that replaces it,
    never writes the old secret back."""
    here, there = two_stores
    await here.write(identities.set_webhook, "wes", "https://h/0", "old-secret")
    await while_held(here, lambda: identities.set_webhook("wes", "https://h/1", "new-secret"),
                     lambda: there.write(identities.set_webhook, "wes", "https://h/2", None))
    row = await here.read(WebhookConfig.get_by_id, "wes")
    assert (row.url, row.token) == ("https://h/2", "new-secret")


async def test_two_first_webhook_registrations_at_once_both_stick(two_stores):
    """The second first registration finds the row the first made (its insert collides) and updates it."""
    here, there = two_stores
    answers = []

    async def second():
        answers.append(await there.write(identities.set_webhook, "xia", "https://h/2", "second-secret"))
    await while_held(here, lambda: identities.set_webhook("xia", "https://h/1", "first-secret"), second)
    assert answers == [{"ok": True, "identity": "xia", "webhookUrl": "https://h/2", "message": "Webhook registered"}]
    row = await here.read(WebhookConfig.get_by_id, "xia")
    assert (row.url, row.token) == ("https://h/2", "second-secret")


async def test_of_two_registrations_racing_for_a_one_use_invite_one_wins(two_stores):
    here, there = two_stores
    code = (await here.write(identities.create_invite, "root", None, False, 1, 1.0))["code"]
    refusals = []

    async def second():
        with pytest.raises(Forbidden) as refused:
            await there.write(identities.register, code, "vera", None, None, ENV)
        refusals.append(refused.value.message)
    await while_held(here, lambda: identities.register(code, "uwe", None, None, ENV), second)
    assert refusals == ["Invite has been used up"]
    assert await here.read(lambda: Invite.get(Invite.code == code).use_count) == 1
    assert await here.read(lambda: User.get_or_none(User.id == "vera")) is None


async def test_of_two_registrations_racing_for_one_name_one_wins(two_stores):
    here, there = two_stores
    first, second = [(await here.write(identities.create_invite, "root", None, False, 1, 1.0))["code"] for _ in "ab"]
    refusals = []

    async def later():
        with pytest.raises(Conflict) as refused:
            await there.write(identities.register, second, "yves", None, None, ENV)
        refusals.append(refused.value.message)
    await while_held(here, lambda: identities.register(first, "yves", None, None, ENV), later)
    assert refusals == ["Identity 'yves' already exists"]
    assert await here.read(lambda: Invite.get(Invite.code == second).use_count) == 0  # the refusal used nothing
