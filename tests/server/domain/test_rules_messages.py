"""Who may receive mail, checked by the send's own insert: the rule of identities.is_known, written once
as SQL (KNOWN_SQL), on both backends. A refused send writes neither a message nor an event."""
from __future__ import annotations

import pytest

from coordserver.domain import identities, messages, users
from coordserver.errors import Invalid
from coordserver.events import log
from coordserver.models import Message
from tests.server.domain.conftest import KNOWN

FIELDS = {"title": "hello"}


def counts() -> tuple[int, int]:
    return Message.select().count(), log.latest_id()


def issue(identity: str) -> None:
    identities.issue_token(identity, False, "agent", "admin")


@pytest.mark.parametrize("recipient, setup", [
    ("bob", None),                      # an environment identity without a users row
    ("dave", issue),                    # an identity that holds a token
    ("erin", identities.ensure_user),   # a users row, not archived
])
async def test_known_recipients_receive(rules_store, recipient, setup):
    if setup:
        await rules_store.write(setup, recipient)
    assert await rules_store.read(identities.is_known, recipient, KNOWN)
    sent = await rules_store.write(messages.send, "alice", recipient, FIELDS, KNOWN)
    assert (sent["recipient"], sent["status"]) == (recipient, "unread")
    assert await rules_store.read(counts) == (1, 1)


@pytest.mark.parametrize("dedupe_key", [None, "once"])
async def test_unknown_and_archived_recipients_are_refused_and_nothing_is_written(rules_store, dedupe_key):
    await rules_store.write(issue, "frank")
    await rules_store.write(users.admin_update, "frank", {"archivedAt": "2026-03-01T00:00:00Z"})
    before = await rules_store.read(counts)
    for recipient in ("nobody", "frank"):
        assert not await rules_store.read(identities.is_known, recipient, KNOWN)
        with pytest.raises(Invalid, match="Invalid recipient mailbox"):
            await rules_store.write(messages.send, "alice", recipient, {**FIELDS, "dedupe_key": dedupe_key}, KNOWN)
    assert await rules_store.read(counts) == before


async def test_an_archived_environment_identity_is_refused(rules_store):
    await rules_store.write(identities.ensure_user, "carol")
    await rules_store.write(users.admin_update, "carol", {"archivedAt": "2026-03-01T00:00:00Z"})
    with pytest.raises(Invalid, match="Invalid recipient mailbox"):
        await rules_store.write(messages.send, "alice", "carol", FIELDS, KNOWN)
    unarchived = await rules_store.write(users.admin_update, "carol", {"archivedAt": None})
    assert unarchived["user"]["archivedAt"] is None
    assert (await rules_store.write(messages.send, "alice", "carol", FIELDS, KNOWN))["recipient"] == "carol"
