"""Loop guard rules through the store, no HTTP, on both backends (issue 28): what trips a guard (a pair's mail,
a ring of three, a channel's chat), whose own thresholds count, what clears it (a human writing, its cooldown, an
admin), what it holds back (one pulse and one push per member) and what each caller reads (the guard, the admin
list, the wake items), each whole."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from coordserver.db import Store
from coordserver.domain import chat, guards, identities, kinds, messages, wake_signal
from coordserver.errors import Conflict, Invalid, NotFound
from coordserver.events.channels import GUARDS, WAKE, WAKE_CHANGED
from coordserver.models import Guard, User
from coordserver.timeutil import FrozenClock, iso, to_db
from tests.server.domain.conftest import KNOWN, START, last_event_id, logged_after, published

RULE = guards.LoopRule(messages=6, minutes=2, cooldown_minutes=10, chat_wake_minutes=5)
AGENTS = frozenset({"ann", "ben", "cat", "dan"})


def people() -> None:
    kinds.declare_env_agents(AGENTS)
    identities.ensure_user("carol")  # a human
    identities.ensure_user("admin", is_admin=True)  # a human admin: told of every guard, oversees them
    identities.ensure_user("robo", is_admin=True, is_agent=True)  # an agent admin: oversees nothing


@pytest.fixture
def store(database_url):
    store = Store(database_url, FrozenClock(START))
    store.guard_rule = RULE
    store.open()
    store.run_sync(people)
    store.published = []
    store.on_commit = lambda _max_event, effects: store.published.extend(effects)
    yield store
    store.close()


async def mail(store, sender: str, recipient: str, n: int = 1) -> None:
    for _ in range(n):
        await store.write(messages.send, sender, recipient, {"title": "ack"}, KNOWN)


async def ping_pong(store, a: str, b: str, rounds: int) -> None:
    for _ in range(rounds):
        await mail(store, a, b)
        await mail(store, b, a)


def own(identity: str, loop_messages: int | None = None, loop_minutes: int | None = None) -> None:
    User.update(loop_messages=loop_messages, loop_minutes=loop_minutes).where(User.id == identity).execute()


def guard_of(guard_id: int, members: list[str], count: int, at, *, minutes: int = 2, kind: str = "mail_loop",
             channel: str | None = None, summary: str) -> dict:
    return {"id": guard_id, "kind": kind, "members": members, "channelId": channel, "messages": count,
            "minutes": minutes, "trippedAt": iso(at), "until": iso(at + timedelta(minutes=10)), "clearedAt": None,
            "clearedBy": None, "summary": summary}


def guard_events(rows: list[tuple]) -> list[tuple]:
    return [row for row in rows if row[0] in ("guard", "guard_cleared")]


async def trip_pair(store) -> dict:
    """ann and ben ping-pong past the threshold (the seventh message, 30 s after START); the guard."""
    await ping_pong(store, "ann", "ben", 3)
    store.clock.advance(seconds=30)
    await mail(store, "ann", "ben")
    [guard] = await store.read(guards.active)
    return guard


PAIR_SUMMARY = "loop suspected between ann and ben: 7 messages in 2 min"


# --- tripping --------------------------------------------------------------------------------------------------

async def test_a_pair_trips_above_its_threshold_once_and_tells_its_members_and_the_human_admins(store):
    await ping_pong(store, "ann", "ben", 3)  # six: at the threshold, not above it
    assert await store.read(guards.active) == []
    before = await store.read(last_event_id)
    store.clock.advance(seconds=30)
    await mail(store, "ann", "ben")
    at = START + timedelta(seconds=30)
    [guard] = await store.read(guards.active)
    assert guard == guard_of(guard["id"], ["ann", "ben"], 7, at, summary=PAIR_SUMMARY)
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard", {"type": "guard", "change": "tripped", "guard": guard}, ["admin", "ann", "ben"])]
    assert published(store, GUARDS) == [{"dueAt": iso(at + timedelta(minutes=10))}]
    await ping_pong(store, "ben", "ann", 5)  # held already: no second guard of the pair
    assert await store.read(guards.active) == [guard]
    assert len(published(store, GUARDS)) == 1


async def test_one_way_mail_an_old_exchange_or_mail_to_a_human_trips_nothing(store):
    await mail(store, "ann", "ben", 10)  # one way
    assert await store.read(guards.active) == []
    await ping_pong(store, "ann", "carol", 5)  # a human takes part
    await mail(store, "cat", "cat", 10)  # to itself
    await mail(store, "dan", "cat", 1)
    assert await store.read(guards.active) == []


async def test_only_the_window_s_messages_count(store):
    await ping_pong(store, "ann", "ben", 3)
    store.clock.advance(minutes=2)  # the six are now exactly as old as the window: out of it
    await mail(store, "ann", "ben")
    await ping_pong(store, "ben", "ann", 2)
    assert await store.read(guards.active) == []
    store.clock.advance(minutes=1, seconds=59)
    await ping_pong(store, "ann", "ben", 1)  # 5 + 2 of the last two minutes
    [guard] = await store.read(guards.active)
    assert (guard["messages"], guard["trippedAt"]) == (7, iso(START + timedelta(minutes=3, seconds=59)))


async def test_no_pair_guard_while_a_human_has_written_to_either_of_them(store):
    await mail(store, "carol", "ben")
    await ping_pong(store, "ann", "ben", 5)
    assert await store.read(guards.active) == []
    store.clock.advance(minutes=2)
    await mail(store, "carol", "dan")  # to someone else: no matter
    await ping_pong(store, "ann", "ben", 4)
    assert [g["members"] for g in await store.read(guards.active)] == [["ann", "ben"]]


async def test_the_strictest_of_the_members_own_thresholds_counts(store):
    await store.write(own, "ben", loop_messages=3)
    await store.write(own, "ann", loop_minutes=5)
    await store.write(own, "cat", loop_messages=1)  # not of the pair
    await mail(store, "ann", "ben")
    store.clock.advance(minutes=3)
    await mail(store, "ben", "ann")
    store.clock.advance(minutes=1)
    await mail(store, "ann", "ben")
    assert await store.read(guards.active) == []  # three: ben's threshold
    store.clock.advance(seconds=30)
    await mail(store, "ben", "ann")  # four within ann's five minutes (two within the deployment's two)
    at = START + timedelta(minutes=4, seconds=30)
    [guard] = await store.read(guards.active)
    assert guard == guard_of(guard["id"], ["ann", "ben"], 4, at, minutes=5,
                             summary="loop suspected between ann and ben: 4 messages in 5 min")


def test_the_deployment_s_rule_or_the_defaults():
    answers = []
    outside = threading.Thread(target=lambda: answers.append(guards.rule()))  # no store's unit: the defaults
    outside.start()
    outside.join()
    assert answers == [guards.LoopRule(40, 2, 15, 5)]


async def test_an_identity_s_own_rule_for_several(store):
    await store.write(own, "ann", loop_messages=30, loop_minutes=1)
    await store.write(own, "ben", loop_messages=4)
    await store.write(own, "cat", loop_minutes=7)
    assert await store.read(guards.rule_for, ["ann", "ben", "cat", "ann"]) == guards.LoopRule(4, 7, 10, 5)
    assert await store.read(guards.rule_for, ["ann"]) == guards.LoopRule(6, 2, 10, 5)
    assert await store.read(guards.rule_for, []) == RULE
    assert await store.read(guards.rule_for, ["dan", "carol"]) == RULE


@pytest.mark.parametrize("value, answer", [(None, None), (1, 1), (500, 500)])
def test_an_own_threshold_within_bounds(value, answer):
    assert guards.threshold(value, "loopMinutes", 500) == answer


@pytest.mark.parametrize("value", [0, 501, True, "5", 5.0, -1])
def test_an_own_threshold_out_of_bounds_is_refused_in_words(value):
    with pytest.raises(Invalid) as refused:
        guards.threshold(value, "loopMinutes", 500)
    assert refused.value.message == "loopMinutes must be an integer from 1 to 500, or null"


async def ring(store, rounds: int, members=("ann", "ben", "cat")) -> None:
    a, b, c = members
    for _ in range(rounds):
        await mail(store, a, b)
        await mail(store, b, c)
        await mail(store, c, a)


RING_SUMMARY = "loop suspected between ann, ben and cat: {} messages in 2 min"


async def test_three_agents_passing_mail_round_a_ring_trip_a_guard_of_the_three(store):
    before = await store.read(last_event_id)
    await ring(store, 2)
    assert await store.read(guards.active) == []
    await mail(store, "ann", "ben")  # the seventh among the three
    [guard] = await store.read(guards.active)
    assert guard == guard_of(guard["id"], ["ann", "ben", "cat"], 7, START, summary=RING_SUMMARY.format(7))
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard", {"type": "guard", "change": "tripped", "guard": guard}, ["admin", "ann", "ben", "cat"])]
    await ring(store, 3)
    assert await store.read(guards.active) == [guard]


async def test_a_ring_uses_the_strictest_threshold_of_the_three_and_the_pair_s_window(store):
    await store.write(own, "cat", loop_messages=3, loop_minutes=30)
    await ring(store, 1)
    assert await store.read(guards.active) == []
    await mail(store, "ann", "ben")  # the fourth: above cat's three; the pair ann, ben has a 2-minute window
    [guard] = await store.read(guards.active)
    assert guard == guard_of(guard["id"], ["ann", "ben", "cat"], 4, START,
                             summary="loop suspected between ann, ben and cat: 4 messages in 2 min")


async def test_no_ring_when_it_is_open_or_a_human_wrote_to_the_third(store):
    for _ in range(5):
        await mail(store, "ann", "ben")
        await mail(store, "ben", "cat")
    assert await store.read(guards.active) == []
    await mail(store, "carol", "cat")
    await ring(store, 4)
    assert await store.read(guards.active) == []


async def test_a_ring_through_a_pair_already_held_still_trips(store):
    pair = await trip_pair(store)
    before = await store.read(last_event_id)
    await mail(store, "ben", "cat")
    await mail(store, "cat", "ann")  # closes the ring ann→ben→cat→ann: 9 among the three
    [held, ringed] = await store.read(guards.active)
    assert held == pair
    assert ringed == guard_of(ringed["id"], ["ann", "ben", "cat"], 9, START + timedelta(seconds=30),
                              summary=RING_SUMMARY.format(9))
    assert guard_events(await store.read(logged_after, before)) == [  # the new guard's, not the pair's
        ("guard", {"type": "guard", "change": "tripped", "guard": ringed}, ["admin", "ann", "ben", "cat"])]


async def test_one_message_closing_two_rings_trips_one_at_a_time(store):
    for third in ("cat", "dan"):
        await mail(store, "ben", third, 3)
        await mail(store, third, "ann", 3)
    await mail(store, "ann", "ben")  # closes ann→ben→cat→ann and ann→ben→dan→ann, each over six
    assert [g["members"] for g in await store.read(guards.active)] == [["ann", "ben", "cat"]]
    await mail(store, "ann", "ben")
    assert [g["members"] for g in await store.read(guards.active)] == [["ann", "ben", "cat"], ["ann", "ben", "dan"]]


async def test_guards_tripped_at_one_instant_are_listed_by_id(store):
    """The later pair's scope sorts first, and PostgreSQL reads active guards through their scope's index: only
    the id keeps the one tripped first ahead."""
    await ping_pong(store, "cat", "dan", 3)
    await ping_pong(store, "ann", "ben", 3)
    await mail(store, "cat", "dan")
    await mail(store, "ann", "ben")
    first, second = await store.read(guards.active)
    assert (first["members"], second["members"], first["trippedAt"]) == (
        ["cat", "dan"], ["ann", "ben"], second["trippedAt"])
    assert first["id"] < second["id"]
    assert [i["guardId"] for i in (await store.read(guards.wake_items, "admin"))[0]] == [first["id"], second["id"]]


async def group(store, *members: str) -> str:
    return (await store.write(chat.create_group, "carol", "bots", list(members), KNOWN))["channelId"]


async def post(store, sender: str, channel: str, n: int = 1) -> None:
    for _ in range(n):
        await store.write(chat.post, sender, channel, "ack")


async def test_agents_chatting_in_a_channel_trip_a_chat_guard_of_its_senders(store):
    channel = await group(store, "ann", "ben", "cat")
    before = await store.read(last_event_id)
    await post(store, "ann", channel, 3)
    await post(store, "ben", channel, 3)
    assert await store.read(guards.active) == []
    await post(store, "ben", channel)
    [guard] = await store.read(guards.active)
    assert guard == guard_of(guard["id"], ["ann", "ben"], 7, START, kind="chat_loop", channel=channel,
                             summary="loop suspected between ann and ben in chat: 7 messages in 2 min")
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard", {"type": "guard", "change": "tripped", "guard": guard}, ["admin", "ann", "ben"])]
    await post(store, "cat", channel, 5)
    assert await store.read(guards.active) == [guard]  # held: not tripped again
    store.clock.advance(seconds=10)
    await post(store, "carol", channel)  # a human writes in it: cleared, by her
    assert await store.read(guards.active) == []
    assert (await store.read(guards.admin_list))["cleared"] == [
        {**guard, "clearedAt": iso(START + timedelta(seconds=10)), "clearedBy": "carol"}]


async def test_no_chat_guard_for_one_agent_alone_a_human_in_the_window_or_old_messages(store):
    alone = await group(store, "ann")
    await post(store, "ann", alone, 10)
    mixed = await group(store, "ann", "ben")
    await post(store, "carol", mixed)
    await post(store, "ann", mixed, 4)
    await post(store, "ben", mixed, 4)
    assert await store.read(guards.active) == []
    store.clock.advance(minutes=2)  # carol's message leaves the window; so do the eight
    await post(store, "ann", mixed, 6)
    assert await store.read(guards.active) == []
    await post(store, "ben", mixed)
    assert [(g["kind"], g["messages"]) for g in await store.read(guards.active)] == [("chat_loop", 7)]


async def test_a_chat_guard_uses_the_strictest_threshold_of_the_channel_s_members(store):
    channel = await group(store, "ann", "ben")
    await store.write(own, "carol", loop_messages=2, loop_minutes=3)
    await post(store, "ann", channel)
    store.clock.advance(minutes=2, seconds=30)
    await post(store, "ben", channel)
    assert await store.read(guards.active) == []
    await post(store, "ben", channel)
    [guard] = await store.read(guards.active)
    assert (guard["messages"], guard["minutes"]) == (3, 3)


async def test_a_group_wakes_each_agent_member_at_most_once_per_its_minutes(store):
    assert await store.write(guards.chat_wakes, "c1", ["ann", "ben"]) == ["ann", "ben"]
    assert await store.write(guards.chat_wakes, "c1", ["ann", "ben"]) == []
    assert await store.write(guards.chat_wakes, "c2", ["ann"]) == ["ann"]
    store.clock.advance(minutes=4, seconds=59)
    assert await store.write(guards.chat_wakes, "c1", ["ann", "cat"]) == ["cat"]
    store.clock.advance(seconds=1)
    assert await store.write(guards.chat_wakes, "c1", ["ann", "ben", "cat"]) == ["ann", "ben"]
    store.clock.advance(minutes=4)
    assert await store.write(guards.chat_wakes, "c2", ["ben"]) == ["ben"]  # c2 woke only ann, 9 minutes ago
    store.clock.advance(minutes=1)
    assert await store.write(guards.chat_wakes, "c2", ["ben"]) == []  # one due (ann), not ben


# --- clearing ---------------------------------------------------------------------------------------------------

async def test_a_human_writing_to_a_member_clears_it_and_pulses_flow_again(store):
    guard = await trip_pair(store)
    await mail(store, "carol", "dan")  # not a member
    assert await store.read(guards.active) == [guard]
    before = await store.read(last_event_id)
    store.clock.advance(minutes=1)
    await mail(store, "ann", "ben")  # ben's one pulse from ann
    await mail(store, "ann", "ben")
    pulses(store)
    await mail(store, "carol", "ben")
    assert pulses(store) == [("pulse", "ben")]  # a human's mail to a held member pulses it, and clears
    assert await store.read(guards.active) == []
    cleared = {**guard, "clearedAt": iso(START + timedelta(minutes=1, seconds=30)), "clearedBy": "carol"}
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard_cleared", {"type": "guard_cleared", "change": "cleared", "guard": cleared}, ["admin", "ann", "ben"])]
    await mail(store, "ann", "ben")
    assert pulses(store) == [("pulse", "ben")]  # and pulses flow again
    assert await store.write(guards.human_wrote, "carol", ["ann", "ben"]) == 0


async def test_the_cooldown_clears_it_on_the_pass_to_the_instant(store):
    guard = await trip_pair(store)
    until = START + timedelta(seconds=30, minutes=10)
    assert await store.read(guards.next_due) == until
    store.clock.advance(minutes=9, seconds=59)
    assert await store.write(guards.clear_due) == 0
    before = await store.read(last_event_id)
    store.clock.advance(seconds=1)
    assert await store.read(guards.active) == []  # past its end it holds no more, pass or not
    assert await store.write(guards.clear_due) == 1
    assert await store.write(guards.clear_due) == 0
    assert await store.read(guards.next_due) is None
    cleared = {**guard, "clearedAt": iso(until), "clearedBy": None}
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard_cleared", {"type": "guard_cleared", "change": "cleared", "guard": cleared}, ["admin", "ann", "ben"])]


async def test_the_pass_clears_at_most_its_batch_oldest_end_first(store, monkeypatch):
    first = await trip_pair(store)
    store.clock.advance(minutes=1)
    await ring(store, 3, ("cat", "dan", "ben"))
    second = (await store.read(guards.active))[1]
    assert await store.read(guards.next_due) == START + timedelta(minutes=10, seconds=30)
    monkeypatch.setattr(guards, "CLEAR_BATCH", 1)
    store.clock.advance(minutes=20)
    assert await store.write(guards.clear_due) == 1
    assert [g["id"] for g in (await store.read(guards.admin_list))["cleared"]] == [first["id"]]
    assert await store.write(guards.clear_due) == 1
    assert [g["id"] for g in (await store.read(guards.admin_list))["cleared"]] == [second["id"], first["id"]]


async def test_an_admin_clears_a_guard_once_and_a_cleared_one_is_refused_in_words(store):
    guard = await trip_pair(store)
    with pytest.raises(NotFound) as refused:
        await store.write(guards.clear_by_admin, guard["id"] + 100, "admin")
    assert refused.value.message == "No such guard"
    before = await store.read(last_event_id)
    store.clock.advance(minutes=1)
    stamp = iso(START + timedelta(minutes=1, seconds=30))
    cleared = {**guard, "clearedAt": stamp, "clearedBy": "admin"}
    assert await store.write(guards.clear_by_admin, guard["id"], "admin") == cleared
    assert guard_events(await store.read(logged_after, before)) == [
        ("guard_cleared", {"type": "guard_cleared", "change": "cleared", "guard": cleared}, ["admin", "ann", "ben"])]
    with pytest.raises(Conflict) as again:
        await store.write(guards.clear_by_admin, guard["id"], "robo")
    assert again.value.message == f"The guard is already cleared (by admin at {stamp})"
    store.clock.advance(minutes=3)  # the pair's mail so far out of the window
    other = await trip_pair(store)
    store.clock.advance(minutes=10)
    await store.write(guards.clear_due)
    with pytest.raises(Conflict) as lapsed:
        await store.write(guards.clear_by_admin, other["id"], "admin")
    assert lapsed.value.message == f"The guard is already cleared (by its cooldown at {other['until']})"


async def test_the_admin_list_shows_the_active_and_the_day_s_cleared_newest_first(store):
    old = await trip_pair(store)
    await store.write(guards.clear_by_admin, old["id"], "admin")  # cleared at START + 30 s
    store.clock.advance(minutes=3)
    older = await trip_pair(store)  # at START + 4 min
    store.clock.advance(minutes=3)
    await mail(store, "carol", "ann")  # clears it at START + 7 min
    store.clock.advance(minutes=3)
    await ring(store, 3, ("ann", "cat", "dan"))
    [ringed] = await store.read(guards.active)
    listed = await store.read(guards.admin_list)
    assert listed == {"active": [ringed], "cleared": [
        {**older, "clearedAt": iso(START + timedelta(minutes=7)), "clearedBy": "carol"},
        {**old, "clearedAt": iso(START + timedelta(seconds=30)), "clearedBy": "admin"}]}
    store.clock.set(START + timedelta(hours=24, seconds=30))  # old: cleared exactly a day ago
    assert await store.read(guards.admin_list) == {"active": [], "cleared": [listed["cleared"][0]]}


# --- holding back ------------------------------------------------------------------------------------------------

def pulses(store) -> list[tuple[str, str]]:
    taken = [("pulse", p["identity"]) if ch is WAKE else ("held", p["identity"]) for ch, p in store.published
             if ch in (WAKE, WAKE_CHANGED)]
    store.published.clear()
    return taken


async def mail_together(store, *pairs: tuple[str, str]) -> None:
    """Sends queued together, stored as the writer stores them: merged, then finished in order, sharing one
    read of the guards (guards.GuardView) until one of them writes one."""
    calls = [(sender, recipient, {"title": "ack"}, KNOWN) for sender, recipient in pairs]
    await store.write(lambda: [finish() for finish in messages._send_many(calls)])


async def test_sends_stored_together_trip_hold_and_clear_as_one_by_one(store):
    await ping_pong(store, "ann", "ben", 3)
    store.clock.advance(seconds=30)
    pulses(store)
    await mail_together(store, ("ann", "ben"), ("ben", "ann"), ("ben", "ann"))  # the first trips it
    assert pulses(store) == [("pulse", "ben"), ("pulse", "ann"), ("held", "ann")]
    [guard] = await store.read(guards.active)
    await mail_together(store, ("ann", "ben"), ("carol", "ben"), ("ann", "ben"), ("ann", "ben"))
    assert pulses(store) == [("held", "ben"), ("pulse", "ben"), ("pulse", "ben"), ("pulse", "ben")]
    assert await store.read(guards.active) == []  # carol cleared it; the sends after hers were not held
    assert (await store.read(guards.admin_list))["cleared"] == [
        {**guard, "clearedAt": iso(START + timedelta(seconds=30)), "clearedBy": "carol"}]


async def test_a_batch_stored_together_reads_its_agents_and_guards_in_its_own_statement(store, monkeypatch):
    """On PostgreSQL the merged statement also reads what the batch's finishers need (messages._BATCH_READ): a
    batch of sends that trips nothing runs that one statement, and reads the agents and guards a read after it
    would."""
    guard = await trip_pair(store)
    statements: list[str] = []
    real_execute = store.database.execute_sql

    def execute_sql(sql, params=None, *args, **kwargs):
        statements.append(sql)
        return real_execute(sql, params, *args, **kwargs)
    monkeypatch.setattr(store.database, "execute_sql", execute_sql)
    batches: list = []
    real_delivered = messages._delivered

    def delivered(sender, recipient, batch=None):
        batches.append(batch)
        return real_delivered(sender, recipient, batch)
    monkeypatch.setattr(messages, "_delivered", delivered)

    calls = [(sender, recipient, {"title": "ack"}, KNOWN) for sender, recipient in
             [("ben", "ann"), ("cat", "carol"), ("carol", "dan"), ("ann", "nobody")]]

    def stored() -> list[str]:
        finishers = messages._send_many(calls)
        ran = [sql for sql in statements if not sql.startswith("PREPARE")]  # (once per connection)
        for finish in finishers[:3]:  # the fourth would raise: nobody is no recipient
            finish()
        return ran
    ran = await store.write(stored)
    if not store.sqlite:
        assert len(ran) == 1 and ran[0].startswith("EXECUTE")  # the merged statement alone
    assert len(batches) == 3 and batches[0] is batches[2]
    assert batches[0].agents == {"ann", "ben", "cat", "dan"}  # carol is human; the unknown recipient's send stored nothing
    assert [g.id for g in batches[0].guards.guards] == [guard["id"]]
    assert [g.scope for g in batches[0].guards.guards] == ["mail:ann,ben"]


async def test_while_it_holds_each_member_has_one_pulse_from_the_others(store):
    await ping_pong(store, "ann", "ben", 3)
    store.clock.advance(seconds=30)
    pulses(store)
    await mail(store, "ann", "ben")  # trips, and is ben's one pulse
    assert pulses(store) == [("pulse", "ben")]
    await mail(store, "ben", "ann")
    await mail(store, "ben", "ann")
    await mail(store, "ann", "ben")
    assert pulses(store) == [("pulse", "ann"), ("held", "ann"), ("held", "ben")]
    await mail(store, "cat", "ben")  # not held: cat is no member
    await mail(store, "ann", "ann")  # its own action: never a pulse
    assert pulses(store) == [("pulse", "ben"), ("held", "ann")]
    store.clock.advance(minutes=10)  # its end: pulses flow, pass or not
    await mail(store, "ann", "ben")
    assert pulses(store) == [("pulse", "ben")]


async def test_a_push_of_a_member_s_message_goes_once_while_it_held_then(store):
    guard = await trip_pair(store)
    at = START + timedelta(seconds=30)
    held = [(sender, to, when) for sender, to, when in [
        ("ann", "ben", at), ("ann", "ben", at + timedelta(minutes=1)), ("ben", "ann", at + timedelta(minutes=9)),
        ("ben", "ann", at)]]
    assert [await store.write(guards.push_allowed, *each) for each in held] == [True, False, True, False]
    free = [(None, "ann", at), ("ann", "ann", at), ("cat", "ann", at), ("ann", "cat", at),
            ("ann", "ben", at - timedelta(seconds=1)), ("ben", "ann", at + timedelta(minutes=10))]
    assert [await store.write(guards.push_allowed, *each) for each in free] == [True] * 6
    assert await store.read(guards.held_since, at + timedelta(hours=5))  # not cleared: holds still
    store.clock.advance(minutes=1)
    await mail(store, "carol", "ann")  # cleared at START + 1 min 30 s
    cleared_at = at + timedelta(minutes=1)
    assert await store.read(guards.held_since, cleared_at - timedelta(seconds=1))
    assert not await store.read(guards.held_since, cleared_at)
    assert guard["id"]


async def test_a_push_after_a_guard_was_cleared_goes_and_one_before_counts_once(store):
    await trip_pair(store)
    at = START + timedelta(seconds=30)
    store.clock.advance(minutes=1)
    await mail(store, "carol", "ann")
    cleared_at = at + timedelta(minutes=1)
    assert await store.write(guards.push_allowed, "ben", "ann", cleared_at) is True
    assert await store.write(guards.push_allowed, "ben", "ann", cleared_at) is True
    assert await store.write(guards.push_allowed, "ben", "ann", cleared_at - timedelta(seconds=1)) is True
    assert await store.write(guards.push_allowed, "ben", "ann", cleared_at - timedelta(seconds=1)) is False


async def test_nothing_held_since_when_no_guard_ever_tripped(store):
    assert not await store.read(guards.held_since, START)


# --- the wake items -----------------------------------------------------------------------------------------------

async def test_members_and_human_admins_have_a_guard_item_others_none(store):
    assert await store.read(guards.wake_items, "ann") == ([], None)
    guard = await trip_pair(store)
    store.clock.advance(minutes=1)
    await ring(store, 3, ("ann", "cat", "dan"))
    ring_guard = (await store.read(guards.active))[1]
    until, ring_until = START + timedelta(minutes=10, seconds=30), START + timedelta(minutes=11, seconds=30)

    def item(g, summary, action, at) -> dict:
        return {"source": "guard", "id": f"guard-{g['id']}", "guardId": g["id"], "kind": "mail_loop",
                "members": g["members"], "summary": summary, "action": action, "priority": "high",
                "until": g["until"], "projectId": None, "ephemeral": False, "_at": at}

    def member(others: str, g) -> str:
        return (f"Your exchange with {others} looks like a loop: stop replying to acknowledgements, finish or hand "
                f"the work to a human. Wake pulses and pushes from them are held to one until {g['until']} or until "
                f"a human writes to you; nothing is lost.")

    def overseer(g) -> str:
        return (f"Agents you administer may be looping: read their exchange and write to one of them to clear the "
                f"guard, or let it clear by itself at {g['until']}.")
    pair_summary = "Loop suspected between ann and ben: 7 messages in 2 min"
    ring_summary = f"Loop suspected between ann, cat and dan: {ring_guard['messages']} messages in 2 min"
    at, ring_at = START + timedelta(seconds=30), START + timedelta(minutes=1, seconds=30)
    assert await store.read(guards.wake_items, "ann") == (
        [item(guard, pair_summary, member("ben", guard), at),
         item(ring_guard, ring_summary, member("cat and dan", ring_guard), ring_at)], until)
    assert await store.read(guards.wake_items, "dan") == (
        [item(ring_guard, ring_summary, member("ann and cat", ring_guard), ring_at)], until)
    assert await store.read(guards.wake_items, "admin") == (
        [item(guard, pair_summary, overseer(guard), at), item(ring_guard, ring_summary, overseer(ring_guard), ring_at)],
        until)
    assert await store.read(guards.wake_items, "carol") == ([], until)
    assert await store.read(guards.wake_items, "robo") == ([], until)  # an agent admin oversees nothing
    store.clock.set(until)
    assert await store.read(guards.wake_items, "ann") == (
        [item(ring_guard, ring_summary, member("cat and dan", ring_guard), ring_at)], ring_until)
    assert await store.read(guards.active) == [ring_guard]
    assert await store.read(guards.active, until - timedelta(seconds=1)) == [guard, ring_guard]


async def test_guards_are_listed_by_when_they_tripped_and_were_cleared_not_by_id(store, monkeypatch):
    """Two processes' clocks may differ by moments: a guard stored later may have tripped earlier."""
    store.clock.set(START + timedelta(minutes=2))
    await ping_pong(store, "ann", "ben", 4)
    store.clock.set(START)
    await ping_pong(store, "cat", "dan", 4)
    late, early = await store.read(lambda: list(Guard.select(Guard.id, Guard.tripped_at).order_by(Guard.id).tuples()))
    assert (late[1], early[1]) == (to_db(START + timedelta(minutes=2)), to_db(START)) and late[0] < early[0]
    store.clock.set(START + timedelta(minutes=5))
    assert [g["id"] for g in await store.read(guards.active)] == [early[0], late[0]]
    items, ends = await store.read(guards.wake_items, "admin")
    assert ([i["guardId"] for i in items], ends) == ([early[0], late[0]], START + timedelta(minutes=10))
    await mail(store, "carol", "cat")  # clears the later one first
    store.clock.advance(minutes=1)
    await mail(store, "carol", "ann")
    assert [g["id"] for g in (await store.read(guards.admin_list))["cleared"]] == [late[0], early[0]]
    monkeypatch.setattr(guards, "RECENT_LIMIT", 1)
    assert [g["id"] for g in (await store.read(guards.admin_list))["cleared"]] == [late[0]]



async def test_each_guard_counts_its_own_pulses(store):
    """ann is held by two guards (with ben, with cat), neither of whose pulses was used yet: her one pulse from
    ben uses the first's, not the second's."""
    def two_guards() -> None:
        now = to_db(START)
        for pair in ("ann,ben", "ann,cat"):
            Guard.create(kind="mail_loop", scope=f"mail:{pair}", members=pair, messages=7, minutes=2, tripped_at=now,
                         until=now + timedelta(minutes=10))

    def wakes() -> list[bool]:
        return [wake_signal.enters_wake(to, by) for to, by in
                [("ann", "ben"), ("ann", "cat"), ("ann", "ben"), ("ann", "cat"), ("ben", "ann"), ("cat", "ann")]]
    await store.write(two_guards)
    assert await store.write(wakes) == [True, True, False, False, True, True]
    assert await store.read(lambda: [g.pulsed for g in Guard.select().order_by(Guard.id)]) == ["ann,ben", "ann,cat"]


async def test_mail_one_way_to_an_agent_writing_elsewhere_trips_nothing(store):
    await mail(store, "ann", "cat")  # ann writes, but never to ben
    await mail(store, "ben", "ann", 8)
    assert await store.read(guards.active) == []


async def test_a_ring_counts_only_the_mail_among_its_three(store):
    await mail(store, "ann", "dan", 5)  # one of the three with someone else
    await ring(store, 2)  # six among the three
    assert await store.read(guards.active) == []
    await mail(store, "ann", "ben")
    assert [(g["members"], g["messages"]) for g in await store.read(guards.active)] == [(["ann", "ben", "cat"], 7)]


async def test_a_chat_guard_holds_a_dm_members_pulses_to_one(store):
    """A DM has no fan-out cooldown: once agents' DM trips its guard (at the seventh post, ann's), each member has
    one pulse from the other (ann's, at ben's eighth), and no more while it holds."""
    dm = (await store.write(chat.open_dm, "ann", "ben", KNOWN))["channelId"]
    for _ in range(3):
        await post(store, "ann", dm)
        await post(store, "ben", dm)
    await post(store, "ann", dm)
    assert [g["kind"] for g in await store.read(guards.active)] == ["chat_loop"]
    store.published.clear()
    await post(store, "ben", dm)
    assert [p["identity"] for p in published(store, WAKE)] == ["ann"]
    store.published.clear()
    for _ in range(3):
        await post(store, "ben", dm)
    assert published(store, WAKE) == []
