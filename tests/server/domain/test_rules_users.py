"""User admin and token rules without HTTP: the admin flag and archiving reach the identity's live tokens,
refused changes write nothing, and a token's backup must be another known identity."""
from __future__ import annotations

import pytest

from coordserver.domain import identities, users
from coordserver.errors import Conflict, Invalid, NotFound
from coordserver.models import Token, User
from tests.server.domain.conftest import KNOWN


def issue(identity: str) -> int:
    token, _plaintext = identities.issue_token(identity, False, "agent", "admin")
    return token.id


async def test_the_admin_flag_and_archiving_reach_the_live_tokens(rules_store):
    token_id = await rules_store.write(issue, "dave")
    made_admin = await rules_store.write(users.admin_update, "dave", {"isAdmin": True, "displayName": " Dave "})
    assert (made_admin["user"]["isAdmin"], made_admin["user"]["displayName"]) == (True, "Dave")
    assert (await rules_store.read(Token.get_by_id, token_id)).is_admin is True
    await rules_store.write(issue, "root")
    await rules_store.write(users.admin_update, "root", {"isAdmin": True})  # dave is not the last admin
    await rules_store.write(users.admin_update, "dave", {"archivedAt": "2026-03-01T00:00:00Z"})
    assert (await rules_store.read(Token.get_by_id, token_id)).revoked_at is not None


@pytest.mark.parametrize("body, message", [
    ({"displayName": "x" * 101}, "displayName must be 1–100 characters"),
    ({"isAgent": 1}, "isAgent must be true or false"),
    ({"avatarUrl": "ftp://img.example/a.png"}, "avatarUrl must be an http or https URL of at most 500 characters, or null"),
    ({"archivedAt": "tomorrow"}, "archivedAt must be an ISO-8601 timestamp or null"),
])
async def test_a_refused_user_change_writes_nothing(rules_store, body, message):
    await rules_store.write(issue, "erin")
    with pytest.raises(Invalid) as refused:
        await rules_store.write(users.admin_update, "erin", {"displayName": "Changed", **body})
    assert refused.value.message == message
    assert (await rules_store.read(User.get_by_id, "erin")).display_name == "erin"
    with pytest.raises(NotFound, match="User not found"):
        await rules_store.write(users.admin_update, "nobody-here", {"isAgent": True})


@pytest.mark.parametrize("changes, message", [
    ({"backupAgent": "frank"}, "An agent cannot be its own backup"),
    ({"backupAgent": "ghost"}, "Unknown identity: ghost"),
    ({"staleTriggerHours": 0}, "staleTriggerHours must be an integer of at least 1"),
    ({"staleTriggerHours": True}, "staleTriggerHours must be an integer of at least 1"),
    ({"label": "x" * 101}, "label must be a string of at most 100 characters"),
])
async def test_token_settings_are_checked(rules_store, changes, message):
    token_id = await rules_store.write(issue, "frank")
    with pytest.raises(Invalid) as refused:
        await rules_store.write(identities.update_token, token_id, changes, KNOWN)
    assert refused.value.message == message


async def test_token_settings_change_and_an_unknown_token_is_not_found(rules_store):
    token_id = await rules_store.write(issue, "gina")
    record = await rules_store.write(identities.update_token, token_id,
                                     {"backupAgent": "bob", "staleTriggerHours": 6, "label": None}, KNOWN)
    assert (record["backupAgent"], record["staleTriggerHours"], record["label"]) == ("bob", 6, None)
    with pytest.raises(NotFound, match="Token not found"):
        await rules_store.write(identities.update_token, 987654, {"label": "x"}, KNOWN)


async def test_the_last_active_admin_is_neither_archived_nor_demoted(rules_store):
    """Archiving or demoting the only admin that can act would leave nobody to administer the server."""
    await rules_store.write(issue, "ida")
    await rules_store.write(users.admin_update, "ida", {"isAdmin": True})
    for body, verb in (({"archivedAt": "2026-03-01T00:00:00Z"}, "archived"), ({"isAdmin": False}, "demoted")):
        with pytest.raises(Conflict) as refused:
            await rules_store.write(users.admin_update, "ida", body)
        assert refused.value.message == f"ida is the only active admin and cannot be {verb}: make another admin first"
    kept = await rules_store.read(User.get_by_id, "ida")
    assert (kept.is_admin, kept.archived_at) == (True, None)

    # an archived admin, or one without a live token, does not count as another admin
    await rules_store.write(issue, "jon")
    await rules_store.write(users.admin_update, "jon", {"isAdmin": True})
    await rules_store.write(users.admin_update, "jon", {"archivedAt": "2026-03-01T00:00:00Z"})
    with pytest.raises(Conflict):
        await rules_store.write(users.admin_update, "ida", {"isAdmin": False})

    # with another admin that can act, both changes are allowed; then that one is the last
    await rules_store.write(issue, "lea")
    await rules_store.write(users.admin_update, "lea", {"isAdmin": True})
    assert (await rules_store.write(users.admin_update, "ida", {"isAdmin": False}))["user"]["isAdmin"] is False
    with pytest.raises(Conflict):
        await rules_store.write(users.admin_update, "lea", {"archivedAt": "2026-03-01T00:00:00Z"})
    # an environment identity can act without a database token
    await rules_store.write(users.admin_update, "ida", {"isAdmin": True})
    await rules_store.write(identities.revoke_identity_tokens, "ida")
    with pytest.raises(Conflict):
        await rules_store.write(users.admin_update, "lea", {"isAdmin": False})
    demoted = await rules_store.write(users.admin_update, "lea", {"isAdmin": False}, frozenset({"ida"}))
    assert demoted["user"]["isAdmin"] is False
