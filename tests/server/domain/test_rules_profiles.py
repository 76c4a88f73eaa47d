"""domain/users.py's rules beyond test_rules_users.py, through the store, no HTTP (over HTTP:
tests/server/api/test_users.py): profiles, the admin list, what an admin change writes and announces
(the identity's token caches, its connections), the per-identity stats and the environment admins' rows.
Fast: the mutation run of users.py uses these with test_rules_users.py."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordserver.domain import identities, users
from coordserver.errors import Invalid, NotFound
from coordserver.events.channels import TOKENS
from coordserver.models import Event, Message, Task, Token, User, WebhookConfig
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START

NOW = to_db(START)
LATER = START + timedelta(minutes=5)


def run(store, fn, *args):
    return store.run_sync(fn, *args)


def issue(store, identity: str, is_admin: bool = False) -> Token:
    return run(store, identities.issue_token, identity, is_admin, None, "admin")[0]


@pytest.mark.parametrize("value, name", [(" Ann ", "Ann"), ("A", "A"), ("x" * 100, "x" * 100)])
def test_display_names(value, name):
    assert users.display_name(value) == name


@pytest.mark.parametrize("value", ["", "   ", "x" * 101, None, 5])
def test_a_display_name_must_have_1_to_100_characters(value):
    with pytest.raises(Invalid) as refused:
        users.display_name(value)
    assert refused.value.message == "displayName must be 1–100 characters"


def test_setting_up_a_profile(store):
    issue(store, "zoe")
    assert run(store, users.setup_profile, "ann", " Ann A. ") == {"identity": "ann", "displayName": "Ann A."}
    assert run(store, User.get_by_id, "zoe").display_name == "zoe"  # only the caller's row changes
    row = run(store, User.get_by_id, "ann")
    assert (row.display_name, row.created_at, row.updated_at) == ("Ann A.", NOW, NOW)
    store.clock.advance(minutes=5)
    assert run(store, users.setup_profile, "ann", "Ann B") == {"identity": "ann", "displayName": "Ann B"}
    row = run(store, User.get_by_id, "ann")
    assert (row.display_name, row.created_at, row.updated_at) == ("Ann B", NOW, to_db(LATER))
    with pytest.raises(Invalid):
        run(store, users.setup_profile, "bob", "")
    assert run(store, User.get_or_none, User.id == "bob") is None


def test_the_admin_list_is_every_row_by_id(store):
    for identity in ("zed", "amy", "kit"):
        issue(store, identity)
    run(store, lambda: User.update(archived_at=NOW).where(User.id == "kit").execute())
    listed = run(store, users.admin_list)
    assert [u["id"] for u in listed] == ["amy", "kit", "zed"]
    assert listed[1] == {**identities.user_json(run(store, User.get_by_id, "kit")),
                         "loopMessages": None, "loopMinutes": None}  # the admin's view: the loop thresholds too
    assert listed[1]["archivedAt"] == iso(NOW)


async def test_an_admin_change_writes_the_columns_and_tells_the_token_caches(store):
    token = issue(store, "dan")
    old = issue(store, "dan")
    run(store, lambda: Token.update(revoked_at=NOW).where(Token.id == old.id).execute())
    store.clock.advance(minutes=5)
    changed = await store.write(users.admin_update, "dan", {"displayName": "Dan", "isAgent": True,
                                                            "avatarUrl": "https://img/d.png", "isAdmin": True})
    assert changed == {"user": {"id": "dan", "displayName": "Dan", "isAdmin": True, "isAgent": True,
                                "avatarUrl": "https://img/d.png", "createdAt": iso(NOW), "updatedAt": iso(LATER),
                                "lastSeenAt": None, "archivedAt": None, "loopMessages": None, "loopMinutes": None}}
    assert run(store, lambda: {t.id: t.is_admin for t in Token.select()}) == {token.id: True, old.id: False}
    assert store.published == [(TOKENS, {"tokenIds": [], "identity": "dan"})]
    store.published.clear()
    same = await store.write(users.admin_update, "dan", {})  # nothing to change: nothing written or told
    assert same["user"]["updatedAt"] == iso(LATER) and store.published == []
    await store.write(users.admin_update, "dan", {"avatarUrl": None, "isAgent": False})
    row = run(store, User.get_by_id, "dan")
    assert (row.avatar_url, row.is_agent, row.is_admin) == (None, False, True) and store.published == []


async def test_archiving_revokes_and_unarchiving_lets_the_environment_token_serve_at_once(store):
    token = issue(store, "eli")
    archived = await store.write(users.admin_update, "eli", {"archivedAt": "2026-03-01T00:00:00+01:00"})
    assert archived["user"]["archivedAt"] == "2026-02-28T23:00:00.000Z"
    assert run(store, lambda: Token.get_by_id(token.id).revoked_at) == NOW
    assert run(store, lambda: [(e.type, e.data["reason"], e.data["wholeIdentity"]) for e in Event.select()]) == [
        ("token_revoked", "archived", True)]
    store.published.clear()
    await store.write(users.admin_update, "eli", {"archivedAt": "2026-03-02T00:00:00Z"})  # already archived
    assert run(store, lambda: Event.select().count()) == 1  # revoked once
    store.published.clear()
    unarchived = await store.write(users.admin_update, "eli", {"archivedAt": None})
    assert unarchived["user"]["archivedAt"] is None
    assert store.published == [(TOKENS, {"tokenIds": [], "identity": "eli"})]
    store.published.clear()
    await store.write(users.admin_update, "eli", {"archivedAt": None})  # was not archived: nothing to tell
    assert store.published == []


@pytest.mark.parametrize("body, message", [
    ({"isAdmin": "yes"}, "isAdmin must be true or false"),
    ({"isAgent": None}, "isAgent must be true or false"),
    ({"avatarUrl": "https://" + "x" * 493},
     "avatarUrl must be an http or https URL of at most 500 characters, or null"),
    ({"avatarUrl": 5}, "avatarUrl must be an http or https URL of at most 500 characters, or null"),
    ({"archivedAt": 5}, "archivedAt must be an ISO-8601 timestamp or null"),
])
async def test_refused_fields(store, body, message):
    issue(store, "fay")
    with pytest.raises(Invalid) as refused:
        await store.write(users.admin_update, "fay", body)
    assert refused.value.message == message


async def test_an_unknown_user_is_not_found(store):
    with pytest.raises(NotFound) as missing:
        await store.write(users.admin_update, "nobody", {"isAgent": True})
    assert missing.value.message == "User not found"


async def test_an_avatar_url_may_be_500_characters_in_any_case_of_scheme(store):
    issue(store, "gus")
    url = "HTTPS://" + "x" * 492
    assert (await store.write(users.admin_update, "gus", {"avatarUrl": url}))["user"]["avatarUrl"] == url


def test_user_stats(store):
    for identity in ("amy", "bob", "cat"):
        issue(store, identity)

    def setup():
        for recipient, status, waiting in (("amy", "unread", True), ("amy", "unread", False), ("amy", "read", True),
                                           ("amy", "archived", False), ("bob", "read", False),
                                           ("cat", "unread", False)):
            Message.create(recipient=recipient, sender="zed", title="t", status=status, response_waiting=waiting,
                           created_at=NOW)
        for assignee, status in (("amy", "ready"), ("amy", "ready"), ("amy", "review"), (None, "ready")):
            Task.create(title="t", creator_user_id="zed", assignee_user_id=assignee, status=status,
                        created_at=NOW, updated_at=NOW)
        WebhookConfig.create(identity="bob", url="https://h/bob", token="s", updated_at=NOW)
        WebhookConfig.create(identity="cat", url=None, token="s", updated_at=NOW)
    run(store, setup)
    seen_at = datetime(2026, 3, 7, 11, 0, tzinfo=timezone.utc)
    stats = run(store, users.user_stats, frozenset({"envy", "amy"}),
                {"amy": (seen_at, "api"), "cat": (seen_at, "sse"), "envy": (seen_at, "mcp")},
                {"amy": True, "envy": False}, frozenset({"amy"}), frozenset({"envy"}))
    empty_inbox = {"unread": 0, "pending": 0, "read": 0, "total": 0}
    assert stats == {"users": {
        "amy": {"inbox": {"unread": 2, "pending": 2, "read": 1, "total": 4}, "swarm": {"ready": 2, "review": 1},
                "presence": {"online": True, "lastSeen": "2026-03-07T11:00:00.000Z", "source": "api"},
                "connection": "sse"},
        "bob": {"inbox": {"unread": 0, "pending": 0, "read": 1, "total": 1}, "swarm": {},
                "presence": {"online": False, "lastSeen": None, "source": None}, "connection": "webhook"},
        "cat": {"inbox": {"unread": 1, "pending": 0, "read": 0, "total": 1}, "swarm": {},
                "presence": {"online": False, "lastSeen": "2026-03-07T11:00:00.000Z", "source": "sse"},
                "connection": "api"},
        "envy": {"inbox": empty_inbox, "swarm": {},
                 "presence": {"online": False, "lastSeen": "2026-03-07T11:00:00.000Z", "source": "mcp"},
                 "connection": "webhook"},
    }}
    alone = run(store, users.user_stats, frozenset(), {}, {}, frozenset(), frozenset())
    assert alone["users"]["cat"]["connection"] == "none" and list(alone["users"]) == ["amy", "bob", "cat"]


def test_environment_admins_get_an_admin_row(store):
    issue(store, "root")  # an existing row, not an admin yet, named by its owner
    run(store, lambda: User.update(display_name="Rooty").where(User.id == "root").execute())
    run(store, users.ensure_admin_rows,
        {"root": ("Root", None), "boss": ("B" * 120, None), "sup": ("Sup", "The Super")})
    rows = run(store, lambda: {u.id: (u.display_name, u.is_admin, u.is_agent) for u in User.select()})
    assert rows == {"root": ("Rooty", True, False), "boss": ("B" * 100, True, False), "sup": ("The Super", True, False)}
    assert run(store, lambda: User.get_by_id("boss").created_at) == NOW
    run(store, users.ensure_admin_rows, {"sup": ("Sup", None)})  # again, at the next start: unchanged
    assert run(store, lambda: User.get_by_id("sup").display_name) == "The Super"
