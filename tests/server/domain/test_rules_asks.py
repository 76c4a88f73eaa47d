"""Ask rules through the store, no HTTP, on both backends: each change logs its event in its unit, an ask closes
once (an expiry after an answer changes nothing), the expiry pass takes only what is due, and the push feeder
sends a new ask to those asked and its outcome to the asker."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from coordserver.domain import asks
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events import log as event_log
from coordserver.models import PushDelivery, WebhookConfig
from coordserver.realtime import webhook_delivery as push
from coordserver.realtime.logreader import GapTracker
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START


def new(**fields) -> dict:
    return {"to": ["bob", "carol"], "question": "Ship it?", "options": ["Yes", "No"], **fields}


def types_logged() -> list[str]:
    return [row[1] for row in event_log.range_after(0)]


async def test_each_change_is_logged_once_and_an_ask_closes_once(rules_store):
    store = rules_store
    deadline = iso(START + timedelta(minutes=5))
    made = await store.write(asks.create, "alice", new(deadline=deadline, default_option=2), KNOWN)
    answered = await store.write(asks.answer, "carol", made["id"], "Yes", None)
    assert (answered["status"], answered["option"]) == ("answered", "Yes")
    store.clock.advance(minutes=10)
    assert await store.write(asks.expire_due) == 0  # answered first: the deadline changes nothing
    with pytest.raises(Conflict):
        await store.write(asks.cancel, "alice", made["id"])
    assert await store.read(types_logged) == ["ask", "ask_answered"]
    with pytest.raises(NotFound):
        await store.read(asks.get, "admin", made["id"])
    with pytest.raises(Forbidden):
        await store.write(asks.answer, "alice", made["id"], 1, None)
    with pytest.raises(Invalid, match="Unknown identity for to: zed"):
        await store.write(asks.create, "alice", new(to=["bob", "zed"]), KNOWN)
    with pytest.raises(Invalid, match="deadline must be in the future"):
        await store.write(asks.create, "alice", new(deadline=iso(START)), KNOWN)


async def test_the_expiry_pass_takes_only_what_is_due_and_applies_the_default(rules_store):
    store = rules_store
    first = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1), default_option=1),
                              KNOWN)
    second = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=2)), KNOWN)
    assert await store.read(asks.next_deadline) == START + timedelta(minutes=1)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 1
    assert await store.write(asks.expire_due) == 0
    expired, _unread = await store.read(asks.get, "bob", first["id"])
    assert (expired["status"], expired["option"]) == ("expired", "Yes")
    assert await store.read(asks.next_deadline) == START + timedelta(minutes=2)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due, 1) == 1
    assert await store.read(asks.next_deadline) is None
    still, _ = await store.read(asks.get, "carol", second["id"])
    assert (still["status"], still["option"]) == ("expired", None)


async def test_a_new_ask_is_pushed_to_those_asked_and_its_outcome_to_the_asker(rules_store):
    store = rules_store
    await store.write(push.ensure_cursor)

    def hooks() -> None:
        for identity in ("alice", "bob", "carol"):
            WebhookConfig.create(identity=identity, url=f"https://{identity}.example/hook", token="t",
                                 updated_at=to_db(START))
    await store.write(hooks)
    made = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    other = await store.write(asks.create, "bob", new(to=["alice"]), KNOWN)
    await store.write(asks.answer, "alice", other["id"], 2, None)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 1
    await store.write(push.feed, {}, GapTracker(), store.sqlite)

    def pushed() -> list[tuple[str, str]]:
        return sorted((d.event_type, d.identity) for d in PushDelivery.select())
    assert await store.read(pushed) == [("ask", "alice"), ("ask", "bob"), ("ask", "carol"),
                                        ("ask_answered", "bob"), ("ask_expired", "alice")]
    texts = {(d.event_type, d.identity): d.body for d in await store.read(lambda: list(PushDelivery.select()))}
    assert "expired unanswered" in texts[("ask_expired", "alice")]
    answered = json.loads(texts[("ask_answered", "bob")])
    assert answered["message"].startswith("alice answered your ask ⟦untrusted 1⟧ (ask ")
    assert "⟦untrusted 2⟧." in answered["message"] and "\nNo\n<<<end untrusted 2 nonce=" in answered["message"]
    assert [u["path"] for u in answered["untrusted"]] == ["/event/question", "/event/option"]  # fenced (push_body)
