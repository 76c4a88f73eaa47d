"""domain/wake_chat.py through the store, no HTTP (over HTTP: tests/server/api/test_chat_wake.py): several
unread DMs at once each show their own latest words, a group without a name is "group chat", and an item's
age is its oldest unread message whoever sent it. The mutation run of wake_chat.py uses these with the
HTTP tests."""
from __future__ import annotations

from datetime import timedelta

from coordserver.domain import chat, wake_chat
from tests.server.domain.conftest import KNOWN, START


def run(store, fn, *args):
    return store.run_sync(fn, *args)


async def send(store, sender: str, channel: str, body: str) -> None:
    await store.write(chat.post, sender, channel, body)


async def test_several_unread_dms_each_show_their_latest_words(rules_store):
    with_alice = (await rules_store.write(chat.open_dm, "alice", "bob", KNOWN))["channelId"]
    with_carol = (await rules_store.write(chat.open_dm, "carol", "bob", KNOWN))["channelId"]
    await send(rules_store, "alice", with_alice, "first from alice")
    await send(rules_store, "carol", with_carol, "from carol")
    await send(rules_store, "alice", with_alice, "latest from alice")
    items = {i["channelId"]: i["summary"] for i in run(rules_store, wake_chat.chat_items, "bob")}
    assert items == {with_alice: 'DM with alice — alice: "latest from alice"',
                     with_carol: 'DM with carol — carol: "from carol"'}


async def test_an_items_age_is_its_oldest_unread_message_and_a_nameless_group_is_group_chat(rules_store):
    group = (await rules_store.write(chat.create_group, "carol", "", ["alice", "bob"], KNOWN))["channelId"]
    await send(rules_store, "alice", group, "a1")  # the oldest, from the sender listed first
    rules_store.clock.advance(hours=1)
    await send(rules_store, "carol", group, "c1")
    await send(rules_store, "alice", group, "a2")
    [item] = run(rules_store, wake_chat.chat_items, "bob")
    assert item["summary"] == "group chat — 3 messages from alice, carol"
    assert item["_at"] == START
    rules_store.clock.advance(hours=1)
    await send(rules_store, "carol", group, "c2")
    [item] = run(rules_store, wake_chat.chat_items, "alice")  # alice's own words are never unread to her
    assert (item["summary"], item["_at"]) == ("group chat — 2 messages from carol", START + timedelta(hours=1))
