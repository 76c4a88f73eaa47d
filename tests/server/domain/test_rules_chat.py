"""Chat through the store, no HTTP, on both backends (over HTTP: tests/server/api/test_chat.py): DMs and groups,
who is in them and what each refusal says, the channel list whole (order, unread counts, archive), a page of
messages, a post's event and whom it wakes (the group fan-out guard), typing, read markers and search, each as
a caller sees it. The mutation run of chat.py uses these."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import chat, identities, kinds, users
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.events.channels import EPHEMERAL, WAKE, WAKE_CHANGED
from coordserver.models import ChatChannel, ChatMessage
from tests.server.domain.conftest import KNOWN, START, logged_after, published, while_held

AT = "2026-03-07T12:00:00.000Z"


def at(minutes: float = 0) -> str:
    moment = START + timedelta(minutes=minutes)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


async def dm(store, a="alice", b="bob") -> str:
    return (await store.write(chat.open_dm, a, b, KNOWN))["channelId"]


async def group(store, creator="alice", name="team", members=("bob", "carol")) -> str:
    return (await store.write(chat.create_group, creator, name, list(members), KNOWN))["channelId"]


def post(store, identity, channel, body):
    return store.write(chat.post, identity, channel, body)


def channels(store, identity, archived=False):
    async def listed():
        return (await store.read(chat.list_channels, identity, archived))["channels"]
    return listed()


def channel_count() -> int:
    return ChatChannel.select().count()


def typing(identity: str, channel_id: str) -> None:
    return chat.typing(channel_id, identity)  # the channel first (chat.typing's order)


async def refused(error, words, call):
    with pytest.raises(error) as caught:
        await call
    assert str(caught.value) == words


# --- channels ---------------------------------------------------------------------------------

async def test_a_dm_is_one_channel_whoever_opens_it(store):
    opened = await store.write(chat.open_dm, "alice", "bob", KNOWN)
    assert opened == {"channelId": opened["channelId"], "type": "dm"}
    assert await store.write(chat.open_dm, "bob", "alice", KNOWN) == opened
    assert await store.write(chat.open_dm, "alice", "bob", KNOWN) == opened
    assert await store.read(chat.members_of, opened["channelId"]) == ["alice", "bob"]
    other = await store.write(chat.open_dm, "alice", "carol", KNOWN)
    assert other["channelId"] != opened["channelId"]
    assert await store.read(channel_count) == 2


async def test_a_dm_with_oneself_or_an_unknown_identity_is_refused_and_nothing_made(store):
    await refused(Invalid, "A DM needs another identity", store.write(chat.open_dm, "alice", "alice", KNOWN))
    await refused(Invalid, "Unknown identity: zed", store.write(chat.open_dm, "alice", "zed", KNOWN))
    await refused(Invalid, "identity is required", store.write(chat.open_dm, "alice", "", KNOWN))
    await refused(Invalid, "Unknown identity: zed",
                  store.write(chat.create_group, "alice", "g", ["bob", "zed"], KNOWN))
    assert await store.read(channel_count) == 0
    # a token identity is known
    await store.write(identities.issue_token, "dave", False, "agent", "admin")
    assert (await store.write(chat.open_dm, "alice", "dave", KNOWN))["type"] == "dm"


async def test_a_group_holds_its_creator_and_each_member_once(store):
    made = await store.write(chat.create_group, "alice", "team", ["carol", "bob", "carol", "alice"], KNOWN)
    assert made == {"channelId": made["channelId"], "type": "group"}
    assert await store.read(chat.members_of, made["channelId"]) == ["alice", "bob", "carol"]
    # those who joined at one instant are listed by name
    [listed] = await channels(store, "bob")
    assert listed["members"] == [{"identity": "alice"}, {"identity": "bob"}, {"identity": "carol"}]


async def test_the_channel_list_is_whole_latest_message_first_then_newest_created(store):
    first_dm = await dm(store)
    store.clock.advance(minutes=1)
    team = await group(store)
    store.clock.advance(minutes=1)
    quiet = await group(store, name="quiet", members=("bob",))
    store.clock.advance(minutes=1)
    empty_newer = await dm(store, "alice", "carol")
    store.clock.advance(minutes=1)
    said = await post(store, "bob", first_dm, "hi alice")
    store.clock.advance(minutes=1)
    await post(store, "carol", team, "first")
    later = await post(store, "alice", team, "latest")
    listed = await channels(store, "alice")
    assert listed == [
        {"id": team, "type": "group", "name": "team", "created_by": "alice", "created_at": at(1),
         "last_read_at": None, "archived_at": None,
         "members": [{"identity": "alice"}, {"identity": "bob"}, {"identity": "carol"}],
         "last_message": {"id": later["id"], "sender": "alice", "body": "latest", "created_at": at(5)},
         "unread_count": 1},
        {"id": first_dm, "type": "dm", "name": None, "created_by": "alice", "created_at": AT,
         "last_read_at": None, "archived_at": None, "members": [{"identity": "alice"}, {"identity": "bob"}],
         "last_message": {"id": said["id"], "sender": "bob", "body": "hi alice", "created_at": at(4)},
         "unread_count": 1},
        {"id": empty_newer, "type": "dm", "name": None, "created_by": "alice", "created_at": at(3),
         "last_read_at": None, "archived_at": None, "members": [{"identity": "alice"}, {"identity": "carol"}],
         "last_message": None, "unread_count": 0},
        {"id": quiet, "type": "group", "name": "quiet", "created_by": "alice", "created_at": at(2),
         "last_read_at": None, "archived_at": None, "members": [{"identity": "alice"}, {"identity": "bob"}],
         "last_message": None, "unread_count": 0},
    ]
    assert [c["id"] for c in await channels(store, "carol")] == [team, empty_newer]
    assert await channels(store, "zed") == []
    assert await channels(store, "alice", archived=True) == []


async def test_two_messages_at_one_instant_order_their_channels_by_id(store):
    one = await dm(store)
    two = await dm(store, "alice", "carol")
    await post(store, "alice", one, "a")
    await post(store, "alice", two, "b")
    assert [c["id"] for c in await channels(store, "alice")] == [two, one]
    await post(store, "alice", one, "c")
    assert [c["id"] for c in await channels(store, "alice")] == [one, two]


async def test_members_join_in_order_and_the_roster_shows_it(store):
    team = await group(store, members=("carol",))
    store.clock.advance(minutes=1)

    def add_bob() -> None:
        chat._add_members(team, ["bob"], START + timedelta(minutes=1))
    await store.write(add_bob)
    [listed] = await channels(store, "bob")
    assert listed["members"] == [{"identity": "alice"}, {"identity": "carol"}, {"identity": "bob"}]


async def test_unread_counts_others_undeleted_messages_after_the_read_marker(store):
    team = await group(store)
    await post(store, "bob", team, "one")
    await post(store, "alice", team, "mine")
    gone = await post(store, "carol", team, "deleted")

    def delete() -> None:
        ChatMessage.update(deleted_at=START).where(ChatMessage.id == gone["id"]).execute()
    await store.write(delete)
    assert (await channels(store, "alice"))[0]["unread_count"] == 1
    assert (await channels(store, "bob"))[0]["unread_count"] == 1
    store.clock.advance(minutes=1)
    assert await store.write(chat.mark_read, "alice", team) == {"ok": True}
    assert published(store, WAKE_CHANGED)[-1] == {"identity": "alice"}
    [listed] = await channels(store, "alice")
    assert (listed["unread_count"], listed["last_read_at"]) == (0, at(1))
    await post(store, "bob", team, "at the marker's instant")  # not newer than the marker
    assert (await channels(store, "alice"))[0]["unread_count"] == 0
    store.clock.advance(seconds=1)
    await post(store, "bob", team, "after")
    assert (await channels(store, "alice"))[0]["unread_count"] == 1
    assert (await channels(store, "carol"))[0]["unread_count"] == 4


async def test_an_archived_channel_lists_apart_until_unarchived(store):
    one = await dm(store)
    two = await dm(store, "alice", "carol")
    store.clock.advance(minutes=1)
    assert await store.write(chat.set_archived, "alice", one, True) == {"ok": True}
    assert published(store, WAKE_CHANGED) == [{"identity": "alice"}]
    assert [c["id"] for c in await channels(store, "alice")] == [two]
    [archived] = await channels(store, "alice", archived=True)
    assert (archived["id"], archived["archived_at"]) == (one, at(1))
    assert [c["id"] for c in await channels(store, "bob")] == [one]  # only alice's view
    assert await store.write(chat.set_archived, "alice", one, False) == {"ok": True}
    assert {c["id"] for c in await channels(store, "alice")} == {one, two}
    assert await channels(store, "alice", archived=True) == []
    assert published(store, WAKE_CHANGED) == [{"identity": "alice"}] * 2


async def test_each_channel_call_refuses_an_unknown_channel_and_a_non_member(store):
    team = await group(store, members=("bob",))
    calls = [(chat.messages, (10, None)), (chat.post, ("x",)), (chat.mark_read, ()), (chat.set_archived, (True,)),
             (typing, ())]
    for fn, rest in calls:
        await refused(NotFound, "Channel not found", store.write(fn, "alice", "no-such-channel", *rest))
        await refused(Forbidden, "Not a member", store.write(fn, "carol", team, *rest))
    assert await store.read(logged_after) == []
    assert store.published == []


# --- messages ---------------------------------------------------------------------------------

async def test_a_page_is_the_newest_before_a_message_oldest_first(store):
    await store.write(kinds.declare_env_agents, frozenset({"bob"}))
    team = await group(store)
    posted = []
    for i in range(5):
        posted.append(await post(store, ["alice", "bob"][i % 2], team, f"m{i}"))
        store.clock.advance(minutes=1)
    await post(store, "alice", await dm(store), "elsewhere")

    def shown(message: dict) -> dict:
        return {key: value for key, value in message.items() if key != "woke"}
    page = await store.read(chat.messages, "carol", team, 2, None)
    assert page == {"messages": [shown(posted[3]), shown(posted[4])]}
    assert shown(posted[3]) == {"id": posted[3]["id"], "channelId": team, "sender": "bob", "body": "m3",
                                "createdAt": at(3), "editedAt": None, "deletedAt": None, "isAgent": True}
    assert posted[4]["isAgent"] is False
    assert await store.read(chat.messages, "carol", team, 2, posted[3]["id"]) == \
        {"messages": [shown(posted[1]), shown(posted[2])]}
    assert await store.read(chat.messages, "carol", team, 10, posted[1]["id"]) == {"messages": [shown(posted[0])]}
    assert await store.read(chat.messages, "carol", team, 10, None) == {"messages": [shown(m) for m in posted]}
    # reading moves no marker
    assert (await channels(store, "carol"))[0]["unread_count"] == 5


async def test_a_post_is_logged_to_every_member_and_wakes_the_others(store):
    await store.write(kinds.declare_env_agents, frozenset({"alice"}))
    team = await group(store)
    posted = await post(store, "alice", team, "hello all")
    assert posted == {"id": posted["id"], "channelId": team, "sender": "alice", "body": "hello all",
                      "createdAt": AT, "editedAt": None, "deletedAt": None, "isAgent": True, "woke": 2}
    assert await store.read(logged_after) == [("chat_message", {
        "type": "chat_message", "channelId": team,
        "message": {"id": posted["id"], "sender": "alice", "body": "hello all", "createdAt": AT, "isAgent": True}},
        ["alice", "bob", "carol"])]
    assert published(store, WAKE) == [{"identity": "bob"}, {"identity": "carol"}]
    human = await post(store, "bob", team, "from a human")
    assert (human["isAgent"], human["woke"]) == (False, 2)
    assert (await store.read(logged_after))[-1][1]["message"]["isAgent"] is False


async def test_a_group_wakes_each_agent_member_once_per_cooldown(store):
    await store.write(kinds.declare_env_agents, frozenset({"bob", "carol"}))
    team = await group(store)
    one_to_one = await dm(store, "alice", "bob")
    assert (await post(store, "alice", team, "1"))["woke"] == 2
    assert published(store, WAKE) == [{"identity": "bob"}, {"identity": "carol"}]
    assert published(store, WAKE_CHANGED) == []
    store.clock.advance(minutes=1)
    assert (await post(store, "alice", team, "2"))["woke"] == 0
    assert published(store, WAKE)[2:] == []
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}, {"identity": "carol"}]
    # a DM is no fan-out: it wakes its agent every time
    assert (await post(store, "alice", one_to_one, "dm"))["woke"] == 1
    assert (await post(store, "alice", one_to_one, "dm again"))["woke"] == 1
    store.clock.advance(minutes=4)
    assert (await post(store, "alice", team, "3"))["woke"] == 2
    # a human member is never held back
    await store.write(users.admin_update, "carol", {"isAgent": False})
    assert (await post(store, "alice", team, "4"))["woke"] == 1
    assert published(store, WAKE)[-1] == {"identity": "carol"}


async def test_an_archived_member_gets_no_new_chat(store):
    team = await group(store)
    with_bob = await dm(store)
    await store.write(identities.ensure_user, "bob")
    await store.write(users.admin_update, "bob", {"archivedAt": "2026-03-01T00:00:00Z"})
    before = await store.read(logged_after)
    posted = await post(store, "alice", team, "still here?")
    assert posted["woke"] == 1
    assert (await store.read(logged_after))[len(before):] == [("chat_message", {
        "type": "chat_message", "channelId": team,
        "message": {"id": posted["id"], "sender": "alice", "body": "still here?", "createdAt": AT,
                    "isAgent": False}}, ["alice", "carol"])]
    count = len(await store.read(logged_after))
    await refused(Invalid, "Unknown identity: bob", post(store, "alice", with_bob, "hello?"))
    assert len(await store.read(logged_after)) == count
    assert (await store.read(chat.messages, "alice", with_bob, 10, None)) == {"messages": []}


async def test_typing_is_told_to_the_other_members_only(store):
    team = await group(store)
    assert await store.read(typing, "bob", team) is None
    assert published(store, EPHEMERAL) == [{"type": "chat_typing", "to": ["alice", "carol"], "data": {
        "type": "chat_typing", "channelId": team, "identity": "bob"}}]
    alone = await group(store, name="alone", members=())
    await store.read(typing, "alice", alone)
    assert len(published(store, EPHEMERAL)) == 1
    assert await store.read(logged_after) == []


# --- search -----------------------------------------------------------------------------------

def found(message: dict, channel_type: str, channel_name: str | None) -> dict:
    return {"id": message["id"], "channel_id": message["channelId"], "sender": message["sender"],
            "body": message["body"], "created_at": message["createdAt"], "channel_type": channel_type,
            "channel_name": channel_name}


def search(store, identity, q, channel=None, sender=None, before=None, after=None, limit=10):
    async def run():
        return (await store.read(chat.search, identity, q, channel, sender, before, after, limit))["messages"]
    return run()


async def test_search_finds_every_word_in_ones_own_channels_newest_first(store):
    team = await group(store)
    with_bob = await dm(store)
    elsewhere = await dm(store, "bob", "carol")
    first = await post(store, "bob", team, "the green release is out")
    store.clock.advance(minutes=1)
    second = await post(store, "alice", with_bob, "release looks green")
    store.clock.advance(minutes=1)
    third = await post(store, "bob", team, "green release again")
    await post(store, "bob", elsewhere, "green release hidden")
    gone = await post(store, "carol", team, "green release deleted")

    def delete() -> None:
        ChatMessage.update(deleted_at=START).where(ChatMessage.id == gone["id"]).execute()
    await store.write(delete)
    assert await search(store, "alice", "green release") == [
        found(third, "group", "team"), found(second, "dm", None), found(first, "group", "team")]
    assert await search(store, "alice", "green release", limit=1) == [found(third, "group", "team")]
    assert await search(store, "alice", "out green") == [found(first, "group", "team")]
    assert await search(store, "alice", "green", channel=with_bob) == [found(second, "dm", None)]
    assert await search(store, "alice", "green", sender="bob") == [found(third, "group", "team"),
                                                                   found(first, "group", "team")]
    assert await search(store, "alice", "green", before=START + timedelta(minutes=1)) == \
        [found(first, "group", "team")]
    assert await search(store, "alice", "green", after=START + timedelta(minutes=1)) == \
        [found(third, "group", "team")]
    assert await search(store, "alice", "green", after=START, before=START + timedelta(minutes=2)) == \
        [found(second, "dm", None)]
    assert await search(store, "alice", "zzz") == []
    assert await search(store, "alice", "!!!!") == []
    # each filter narrows the caller's own undeleted messages, never widens them
    assert await search(store, "alice", "green", channel=elsewhere) == []
    everything = [found(third, "group", "team"), found(second, "dm", None), found(first, "group", "team")]
    assert await search(store, "alice", "green", sender="bob", channel=team) == [everything[0], everything[2]]
    assert await search(store, "alice", "green", before=START + timedelta(days=1)) == everything
    assert await search(store, "alice", "green", after=START - timedelta(days=1)) == everything
    assert await search(store, "carol", "green", sender="carol") == []
    # newest first by time, then id
    store.clock.set(START - timedelta(hours=1))
    backdated = await post(store, "bob", team, "green from an hour before")
    store.clock.set(START + timedelta(minutes=2))
    tied = await post(store, "bob", team, "green at third's instant")
    assert await search(store, "alice", "green") == [found(tied, "group", "team"), *everything,
                                                     found(backdated, "group", "team")]


async def test_a_short_query_is_a_substring_its_wildcards_plain(store):
    team = await group(store)
    plain = await post(store, "bob", team, "ratio 50%off")
    await post(store, "bob", team, "ratio 5 off")
    await post(store, "bob", team, "nothing")
    await post(store, "bob", await dm(store, "bob", "carol"), "ratio 0% elsewhere")
    gone = await post(store, "bob", team, "ratio 0% deleted")

    def delete() -> None:
        ChatMessage.update(deleted_at=START).where(ChatMessage.id == gone["id"]).execute()
    await store.write(delete)
    assert await search(store, "alice", " 0% ") == [found(plain, "group", "team")]
    assert await search(store, "alice", "%") == [found(plain, "group", "team")]
    both = await search(store, "alice", "ti")
    assert [m["body"] for m in both] == ["ratio 5 off", "ratio 50%off"]
    assert await search(store, "alice", "_") == []
    assert await search(store, "alice", "Ra") == both  # case-insensitive
    assert await search(store, "alice", "rat") == []  # three characters are a word of full text
    assert await search(store, "alice", "ratio") == both


async def test_a_dm_opened_by_both_sides_at_once_is_one_channel(two_stores):
    """Two processes open the same DM at once: the second's insert meets the first's key and reads its channel."""
    here, there = two_stores
    opened_there: list[dict] = []

    async def open_meanwhile() -> None:
        opened_there.append(await there.write(chat.open_dm, "bob", "alice", KNOWN))
    opened_here = await while_held(here, lambda: chat.open_dm("alice", "bob", KNOWN), open_meanwhile)
    assert opened_there == [opened_here]
    assert await here.read(lambda: ChatChannel.select().count()) == 1
