"""Buzz webhook config rules without HTTP: names that fit the ingest URL, normalised recipients, known agents,
owner-or-admin changes, and a PATCH that changes nothing is refused."""
from __future__ import annotations

import pytest

from coordserver.domain import buzz
from coordserver.errors import Forbidden, Invalid, NotFound
from tests.server.domain.conftest import KNOWN

BASE = "https://coord.example"


def create(store, owner: str = "alice", **body):
    return store.write(buzz.create_webhook, owner, body, BASE, KNOWN)


def update(store, webhook_id: int, identity: str, **body):
    return store.write(buzz.update_webhook, webhook_id, identity, identity == "admin", body, BASE, KNOWN)


async def test_a_new_webhook_is_normalised_and_enabled(rules_store):
    hook = await create(rules_store, appName=" deploys ", title=" Deploys ", forUsers=["Bob", "alice", "bob", " "],
                        wakeAgent="bob", enabled=False)
    assert (hook["appName"], hook["title"], hook["forUsers"], hook["wakeAgent"]) == ("deploys", "Deploys",
                                                                                    "bob,alice", "bob")
    assert hook["enabled"] is True  # a new webhook starts enabled; PATCH disables it
    assert hook["ingestUrl"] == f"{BASE}/api/ingest/deploys/{hook['token']}"


@pytest.mark.parametrize("body, message", [
    ({"appName": "ci", "title": " "}, "appName and title are required"),
    ({"title": "CI"}, "appName and title are required"),
    ({"appName": "ci/prod", "title": "CI"}, "appName may contain only letters, digits, '.', '_' and '-'"),
    ({"appName": "a" * 51, "title": "CI"}, "appName is longer than 50 characters"),
    ({"appName": "ci", "title": "CI", "wakeAgent": "ghost"}, "wakeAgent is not a known identity: ghost"),
    ({"appName": "ci", "title": "CI", "notifyAgent": 7}, "notifyAgent must be an identity"),
    ({"appName": "ci", "title": "CI", "forUsers": ["alice", 3]}, "forUsers must be a comma-separated string"),
])
async def test_bad_configs_are_refused_and_not_stored(rules_store, body, message):
    with pytest.raises(Invalid) as refused:
        await create(rules_store, **body)
    assert refused.value.message.startswith(message)
    assert await rules_store.read(buzz.list_webhooks, "admin", True, BASE) == []


async def test_only_the_owner_or_an_admin_changes_a_webhook(rules_store):
    hook = await create(rules_store, appName="ci", title="CI", notifyAgent="carol")
    with pytest.raises(Forbidden, match="Only the webhook's owner or an admin"):
        await update(rules_store, hook["id"], "bob", title="bob's")
    with pytest.raises(Invalid, match="No fields to update"):
        await update(rules_store, hook["id"], "alice")
    with pytest.raises(Invalid, match="enabled must be true or false"):
        await update(rules_store, hook["id"], "alice", enabled="no")
    changed = await update(rules_store, hook["id"], "admin", enabled=False, notifyAgent=None, forUsers="bob")
    assert (changed["enabled"], changed["notifyAgent"], changed["forUsers"]) == (False, None, "bob")
    with pytest.raises(NotFound, match="Webhook not found"):
        await update(rules_store, 987654, "alice", title="x")
