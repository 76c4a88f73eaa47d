"""Ask rules through the store, no HTTP, on both backends: each change logs its event in its unit, an ask closes
once (an expiry after an answer changes nothing), the expiry pass takes only what is due, and the push feeder
sends a new ask to those asked and its outcome to the asker."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from coordserver.domain import asks, kinds
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events import log as event_log
from coordserver.events.channels import ASKS, WAKE, WAKE_CHANGED
from coordserver.models import Ask, PushDelivery, WebhookConfig
from coordserver.realtime import webhook_delivery as push
from coordserver.realtime.logreader import GapTracker
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import (KNOWN, START, last_event_id, logged_after, move_row_last, published,
                                         while_held)


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


# --- what each change says, whole (mutation testing found these held only over HTTP) ---------------------------

def logged() -> list[tuple]:
    return [(row[1], row[2], row[3], sorted(row[4] or [])) for row in event_log.range_after(0)]


async def test_an_ask_and_its_answer_read_whole_and_log_whole(rules_store):
    store = rules_store
    deadline = START + timedelta(minutes=30)
    made = await store.write(asks.create, "alice", new(to="bob", options=["Ship", "Wait"], allow_text=True,
                                                         deadline=iso(deadline), default_option=2,
                                                         context={"taskId": "t-1"}), KNOWN)
    opened = {"id": made["id"], "from": "alice", "fromIsAgent": False, "to": ["bob"], "question": "Ship it?",
              "options": ["Ship", "Wait"], "allowText": True, "deadline": iso(deadline), "defaultOption": 2,
              "context": {"taskId": "t-1"}, "status": "open", "answeredBy": None, "option": None, "text": None,
              "createdAt": iso(START), "closedAt": None, "readAt": None}
    assert made == opened
    assert await store.read(asks.get, "bob", made["id"]) == (opened, False)
    assert await store.read(asks.get, "alice", made["id"]) == (opened, False)  # open: nothing to mark read
    store.clock.advance(minutes=1)
    answered = await store.write(asks.answer, "bob", made["id"], None, "After the freeze")
    closed = {**opened, "status": "answered", "answeredBy": "bob", "text": "After the freeze",
              "closedAt": iso(START + timedelta(minutes=1))}
    assert answered == closed
    assert await store.read(asks.get, "alice", made["id"]) == (closed, True)  # the outcome, first read
    audience = ["alice", "bob"]
    assert await store.read(logged) == [
        ("ask", {"type": "ask", "askId": made["id"], "from": "alice", "to": ["bob"], "question": "Ship it?",
                 "options": ["Ship", "Wait"], "allowText": True, "deadline": iso(deadline)}, False, audience),
        ("ask_answered", {"type": "ask_answered", "askId": made["id"], "from": "alice", "to": ["bob"],
                          "question": "Ship it?", "answeredBy": "bob", "option": None,
                          "text": "After the freeze"}, False, audience)]


async def test_a_cancel_and_an_expiry_log_whole(rules_store):
    store = rules_store
    cancelled = await store.write(asks.create, "alice", new(to=["bob", "bob", "carol"]), KNOWN)
    assert cancelled["to"] == ["bob", "carol"]  # each identity once, in the order given
    store.clock.advance(minutes=1)
    result = await store.write(asks.cancel, "alice", cancelled["id"])
    stamp = iso(START + timedelta(minutes=1))
    assert (result["status"], result["closedAt"], result["readAt"]) == ("cancelled", stamp, stamp)
    expiring = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=2), default_option=1),
                                 KNOWN)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 1
    expired, first_read = await store.read(asks.get, "alice", expiring["id"])
    assert (expired["status"], expired["option"], expired["answeredBy"], expired["closedAt"], first_read) == (
        "expired", "Yes", None, iso(START + timedelta(minutes=2)), True)
    events = [(kind, data) for kind, data, _all, _to in await store.read(logged)]
    assert events[1] == ("ask_cancelled", {"type": "ask_cancelled", "askId": cancelled["id"], "from": "alice",
                                           "to": ["bob", "carol"], "question": "Ship it?"})
    assert events[3] == ("ask_expired", {"type": "ask_expired", "askId": expiring["id"], "from": "alice",
                                         "to": ["bob", "carol"], "question": "Ship it?", "option": "Yes"})
    assert await store.read(asks.next_deadline) is None


async def test_a_closed_ask_refuses_in_words_naming_why(rules_store):
    store = rules_store

    async def refusal(call, *args) -> tuple[str, dict]:
        with pytest.raises(Conflict) as refused:
            await store.write(call, *args)
        return refused.value.message, refused.value.extra

    answered = await store.write(asks.create, "alice", new(), KNOWN)
    await store.write(asks.answer, "bob", answered["id"], 2, None)
    assert await refusal(asks.answer, "carol", answered["id"], "Yes", None) == (
        "Already answered by bob", {"answeredBy": "bob", "status": "answered"})
    assert await refusal(asks.cancel, "alice", answered["id"]) == (
        "Already answered by bob", {"answeredBy": "bob", "status": "answered"})
    cancelled = await store.write(asks.create, "alice", new(), KNOWN)
    await store.write(asks.cancel, "alice", cancelled["id"])
    assert await refusal(asks.answer, "bob", cancelled["id"], 1, None) == (
        "The ask was cancelled", {"status": "cancelled"})
    due = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    store.clock.advance(minutes=1)
    assert await refusal(asks.answer, "bob", due["id"], 1, None) == (
        "The ask's deadline has passed", {"status": "expired"})  # the expiry pass has not run yet
    await store.write(asks.expire_due)
    assert await refusal(asks.answer, "bob", due["id"], 1, None) == ("The ask has expired", {"status": "expired"})
    assert await refusal(asks.cancel, "alice", due["id"]) == ("The ask has expired", {"status": "expired"})


@pytest.mark.parametrize("option, text, why", [
    (None, None, asks.ANSWER_ONE), (1, "both", asks.ANSWER_ONE),
    (None, "words", "This ask takes one of its options, not text"),
    (True, None, "option must be an option's number or label"),
    (1.0, None, "option must be an option's number or label"),
    (0, None, "Unknown option for this ask: 0"), (3, None, "Unknown option for this ask: 3"),
    ("yes", None, "Unknown option for this ask: yes")])
async def test_an_answer_is_one_option_in_words(rules_store, option, text, why):
    store = rules_store
    made = await store.write(asks.create, "alice", new(), KNOWN)
    with pytest.raises(Invalid) as refused:
        await store.write(asks.answer, "bob", made["id"], option, text)
    assert refused.value.message == why
    first, second = await store.write(asks.answer, "bob", made["id"], 2, None), None
    assert (first["option"], second) == ("No", None)


@pytest.mark.parametrize("text", ["", "   ", "x" * (asks.TEXT_MAX + 1)])
async def test_a_text_answer_is_1_to_2000_characters(rules_store, text):
    store = rules_store
    made = await store.write(asks.create, "alice", new(options=None, allow_text=True), KNOWN)
    assert made["options"] == []
    with pytest.raises(Invalid) as refused:
        await store.write(asks.answer, "bob", made["id"], None, text)
    assert refused.value.message == f"text must be 1 to {asks.TEXT_MAX} characters"
    assert (await store.write(asks.answer, "bob", made["id"], None, "x" * asks.TEXT_MAX))["text"] == "x" * 2000


OPTIONS_WORDS = "options must be a list of 2 to 9 distinct labels of at most 50 characters"


@pytest.mark.parametrize("fields, why", [
    ({"to": []}, "to must be an identity or a list of 1 to 20 identities"),
    ({"to": 7}, "to must be an identity or a list of 1 to 20 identities"),
    ({"to": [f"x{n}" for n in range(21)]}, "to must be an identity or a list of 1 to 20 identities"),
    ({"question": "  "}, "question is required"), ({"question": None}, "question is required"),
    ({"question": "q" * 2001}, "question is longer than 2000 characters"),
    ({"options": ["Only"]}, OPTIONS_WORDS), ({"options": [str(n) for n in range(10)]}, OPTIONS_WORDS),
    ({"options": ["Yes", "Yes"]}, OPTIONS_WORDS), ({"options": ["Yes", " "]}, OPTIONS_WORDS),
    ({"options": ["Yes", "n" * 51]}, OPTIONS_WORDS), ({"options": ["Yes", 2]}, OPTIONS_WORDS),
    ({"options": "Yes, No"}, OPTIONS_WORDS),
    ({"options": None}, asks.NEEDS_OPTIONS), ({"options": []}, asks.NEEDS_OPTIONS),
    ({"default_option": 3}, asks.DEFAULT_NEEDS_OPTIONS), ({"default_option": 0}, asks.DEFAULT_NEEDS_OPTIONS),
    ({"default_option": "1"}, asks.DEFAULT_NEEDS_OPTIONS),
    ({"deadline": "tomorrow"}, "deadline must be an ISO-8601 timestamp"),
    ({"deadline": 1700000000}, "deadline must be an ISO-8601 timestamp"),
    ({"deadline": iso(START - timedelta(seconds=1))}, "deadline must be in the future"),
    ({"deadline": iso(START)}, "deadline must be in the future")])  # now is not the future
async def test_a_new_ask_is_refused_in_words_and_nothing_is_written(rules_store, fields, why):
    store = rules_store
    with pytest.raises(Invalid) as refused:
        await store.write(asks.create, "alice", new(**fields), KNOWN)
    assert refused.value.message == why
    assert await store.read(types_logged) == []
    assert await store.read(asks.list_asks, "alice", None, None, 50) == {"asks": []}


async def test_the_limits_themselves_are_accepted(rules_store):
    store = rules_store
    made = await store.write(asks.create, "alice", new(to=["bob"] * 20, question="q" * 2000,
                                                         options=[str(n) for n in range(9)], default_option=9,
                                                         deadline=START + timedelta(seconds=1)), KNOWN)
    assert (made["to"], len(made["question"]), made["defaultOption"]) == (["bob"], 2000, 9)
    two = await store.write(asks.create, "alice", new(options=["y" * 50, "n"]), KNOWN)
    assert two["options"] == ["y" * 50, "n"]


# --- the bus, listing, reading an outcome and the wake items (mutation testing: held only over HTTP) ----------

async def test_each_change_is_announced_on_the_bus_once_committed(store):
    deadline = START + timedelta(minutes=5)
    answered = await store.write(asks.create, "alice", new(deadline=iso(deadline)), KNOWN)
    await store.write(asks.answer, "bob", answered["id"], 1, None)
    cancelled = await store.write(asks.create, "alice", new(), KNOWN)
    await store.write(asks.cancel, "alice", cancelled["id"])
    expiring = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 1
    with pytest.raises(Conflict):
        await store.write(asks.cancel, "alice", expiring["id"])  # refused: nothing announced
    assert published(store, ASKS) == [
        {"askId": answered["id"], "status": "open", "deadline": iso(deadline)},
        {"askId": answered["id"], "status": "answered", "deadline": iso(deadline)},
        {"askId": cancelled["id"], "status": "open", "deadline": None},
        {"askId": cancelled["id"], "status": "cancelled", "deadline": None},
        {"askId": expiring["id"], "status": "open", "deadline": iso(START + timedelta(minutes=1))},
        {"askId": expiring["id"], "status": "expired", "deadline": iso(START + timedelta(minutes=1))}]


async def test_a_list_is_one_identity_s_asks_by_role_and_status_newest_first(store):
    await store.write(kinds.declare_env_agents, frozenset({"bot"}))
    sent = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    received = await store.write(asks.create, "bot", new(to=["alice", "carol"]), KNOWN)
    others = await store.write(asks.create, "bob", new(to=["carol"]), KNOWN)
    await store.write(asks.answer, "alice", received["id"], 1, None)

    async def ids(identity, role, status, limit=50) -> list[int]:
        return [a["id"] for a in (await store.read(asks.list_asks, identity, role, status, limit))["asks"]]
    assert await ids("alice", None, None) == [received["id"], sent["id"]]
    assert await ids("alice", "sent", None) == [sent["id"]]
    assert await ids("alice", "received", None) == [received["id"]]
    assert await ids("alice", None, "open") == [sent["id"]]
    assert await ids("alice", None, "answered") == [received["id"]]
    assert await ids("alice", "sent", "answered") == []
    assert await ids("alice", None, None, 1) == [received["id"]]
    assert await ids("carol", None, None) == [others["id"], received["id"]]
    assert await ids("zed", None, None) == []
    listed = (await store.read(asks.list_asks, "carol", "received", None, 50))["asks"]
    assert [(a["from"], a["fromIsAgent"]) for a in listed] == [("bob", False), ("bot", True)]
    assert listed[1] == (await store.read(asks.get, "carol", received["id"]))[0]


async def test_the_asker_marks_a_closed_outcome_read_once(store):
    made = await store.write(asks.create, "alice", new(), KNOWN)
    before = await store.read(last_event_id)
    assert (await store.write(asks.mark_read, "alice", made["id"]))["readAt"] is None  # open: nothing to read
    await store.write(asks.answer, "bob", made["id"], "No", None)
    assert (await store.write(asks.mark_read, "bob", made["id"]))["readAt"] is None  # not the asker's outcome
    store.clock.advance(minutes=3)
    read = await store.write(asks.mark_read, "alice", made["id"])
    stamp = iso(START + timedelta(minutes=3))
    assert (read["status"], read["option"], read["readAt"]) == ("answered", "No", stamp)
    assert await store.read(asks.get, "alice", made["id"]) == (read, False)
    store.clock.advance(minutes=1)
    assert await store.write(asks.mark_read, "alice", made["id"]) == read  # the first read stays
    assert [kind for kind, _data, _to in await store.read(logged_after, before)] == ["ask_answered", "ask_read"]
    assert (await store.read(logged_after, before))[1:] == [
        ("ask_read", {"type": "ask_read", "askId": made["id"], "from": "alice"}, ["alice"])]
    with pytest.raises(NotFound) as refused:
        await store.write(asks.mark_read, "admin", made["id"])
    assert refused.value.message == asks.NOT_FOUND


async def test_those_asked_have_a_high_item_per_open_ask_oldest_first(store):
    long = "Which   of\nthese " + "w" * 120
    quoted = "Which of these " + "w" * 84 + "…"
    text_only = await store.write(asks.create, "alice", new(to=["bob"], options=None, allow_text=True,
                                                              question=long), KNOWN)
    store.clock.advance(minutes=1)
    both = await store.write(asks.create, "carol", new(to=["bob"], allow_text=True,
                                                         deadline=START + timedelta(hours=1)), KNOWN)
    store.clock.advance(minutes=1)
    options = await store.write(asks.create, "alice", new(to=["bob", "carol"], question="Ship it?"), KNOWN)
    closed = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    await store.write(asks.cancel, "alice", closed["id"])
    await store.write(asks.create, "bob", new(to=["carol"]), KNOWN)  # bob's own: not put to him
    items, total = await store.read(asks.asked_items, "bob", 10)
    assert total == 3
    assert items == [
        {"source": "ask", "id": text_only["id"], "summary": f"From alice: '{quoted}'",
         "action": f"alice asks you: answer it in text. POST /api/asks/{text_only['id']}/answer.",
         "priority": "high", "from": "alice", "question": long, "options": [], "allowText": True,
         "deadline": None, "ephemeral": False, "_at": START},
        {"source": "ask", "id": both["id"], "summary": "From carol: 'Ship it?'",
         "action": f"carol asks you: pick one of its options (or answer in text). POST /api/asks/{both['id']}/answer.",
         "priority": "high", "from": "carol", "question": "Ship it?", "options": ["Yes", "No"], "allowText": True,
         "deadline": iso(START + timedelta(hours=1)), "ephemeral": False, "_at": START + timedelta(minutes=1)},
        {"source": "ask", "id": options["id"], "summary": "From alice: 'Ship it?'",
         "action": f"alice asks you: pick one of its options. POST /api/asks/{options['id']}/answer.",
         "priority": "high", "from": "alice", "question": "Ship it?", "options": ["Yes", "No"], "allowText": False,
         "deadline": None, "ephemeral": False, "_at": START + timedelta(minutes=2)}]
    assert await store.read(asks.asked_items, "bob", 1) == (items[:1], 3)
    assert await store.read(asks.asked_items, "bob", 2) == (items[:2], 3)
    assert await store.read(asks.asked_items, "bob", 3) == (items, 3)
    assert await store.read(asks.asked_items, "alice", 10) == ([], 0)


async def test_a_quoted_question_of_exactly_100_characters_is_whole():
    assert asks._quoted("q" * 100) == "q" * 100
    assert asks._quoted("q" * 101) == "q" * 99 + "…"


async def test_the_asker_has_a_normal_item_per_outcome_until_read(store):
    answered = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    texted = await store.write(asks.create, "alice", new(to=["carol"], options=None, allow_text=True,
                                                           question="Why?"), KNOWN)
    defaulted = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1),
                                                              default_option=2), KNOWN)
    unanswered = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    cancelled = await store.write(asks.create, "alice", new(), KNOWN)
    await store.write(asks.cancel, "alice", cancelled["id"])
    await store.write(asks.create, "bob", new(to=["alice"]), KNOWN)  # bob's, open
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 2
    store.clock.advance(minutes=1)
    await store.write(asks.answer, "carol", texted["id"], None, "Because   the\ntests " + "t" * 100)
    store.clock.advance(minutes=1)
    await store.write(asks.answer, "bob", answered["id"], "Yes", None)

    def item(ask, summary, status, by, option, text, minutes) -> dict:
        return {"source": "ask_result", "id": ask["id"], "summary": summary,
                "action": f"Read the outcome (GET /api/asks/{ask['id']}, which clears this item) and act on it.",
                "priority": "normal", "status": status, "answeredBy": by, "option": option, "text": text,
                "ephemeral": False, "_at": START + timedelta(minutes=minutes)}
    texts = "Because   the\ntests " + "t" * 100
    items = [item(defaulted, "'Ship it?' expired unanswered: the default No applies", "expired", None, "No", None, 1),
             item(unanswered, "'Ship it?' expired unanswered", "expired", None, None, None, 1),
             item(texted, "carol answered 'Why?': \"Because the tests " + "t" * 81 + "…\"", "answered", "carol",
                  None, texts, 2),
             item(answered, "bob answered 'Ship it?': Yes", "answered", "bob", "Yes", None, 3)]
    assert await store.read(asks.result_items, "alice", 10) == (items, 4)
    assert await store.read(asks.result_items, "alice", 2) == (items[:2], 4)
    assert await store.read(asks.result_items, "alice", 3) == (items[:3], 4)
    assert await store.read(asks.result_items, "alice", 4) == (items, 4)
    assert await store.read(asks.result_items, "bob", 10) == ([], 0)
    await store.write(asks.mark_read, "alice", defaulted["id"])
    assert await store.read(asks.result_items, "alice", 10) == (items[1:], 3)


# --- survivors of the run of 2026-11-27: refusals whole, whom a change wakes, the expiry pass's batch -------------

async def test_only_those_asked_answer_and_only_the_asker_cancels_in_words(store):
    made = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    with pytest.raises(Forbidden) as answering:
        await store.write(asks.answer, "alice", made["id"], 1, None)
    assert answering.value.message == "Only those asked may answer"
    with pytest.raises(Forbidden) as cancelling:
        await store.write(asks.cancel, "bob", made["id"])
    assert cancelling.value.message == "Only the asker may cancel an ask"
    assert await store.read(types_logged) == ["ask"]


def pulses(store) -> list[tuple[str, str]]:
    taken = [("pulse" if ch is WAKE else "changed", p["identity"]) for ch, p in store.published
             if ch in (WAKE, WAKE_CHANGED)]
    store.published.clear()
    return taken


async def test_a_change_wakes_those_it_concerns_never_its_actor(store):
    made = await store.write(asks.create, "alice", new(to=["alice", "bob"]), KNOWN)  # alice asks herself too
    assert pulses(store) == [("changed", "alice"), ("pulse", "bob")]
    await store.write(asks.answer, "alice", made["id"], 1, None)
    assert pulses(store) == [("changed", "alice")]  # her own answer to her own ask
    other = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    pulses(store)
    await store.write(asks.answer, "bob", other["id"], 1, None)
    assert pulses(store) == [("pulse", "alice")]
    await store.write(asks.create, "alice", new(to=["alice"], deadline=START + timedelta(minutes=1)), KNOWN)
    pulses(store)
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 1
    assert pulses(store) == [("pulse", "alice")]  # the server expired it: a pulse even to the one asked
    cancelled = await store.write(asks.create, "alice", new(to=["bob"]), KNOWN)
    pulses(store)
    await store.write(asks.cancel, "alice", cancelled["id"])
    assert pulses(store) == []


async def test_the_expiry_pass_takes_the_earliest_deadlines_first_and_only_what_is_open(store):
    answered = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    await store.write(asks.answer, "bob", answered["id"], "Yes", None)
    later = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=3)), KNOWN)
    earlier = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=2),
                                                            default_option=2), KNOWN)  # the last option
    tied = await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=2)), KNOWN)
    await store.write(move_row_last, Ask, earlier["id"], "asker")  # the tie is the id's to break, not the rows' places
    store.clock.advance(minutes=5)

    async def states() -> list[tuple]:
        return [((await store.read(asks.get, "bob", a["id"]))[0]["status"],
                 (await store.read(asks.get, "bob", a["id"]))[0]["option"]) for a in (answered, later, earlier, tied)]
    assert await store.write(asks.expire_due, 1) == 1
    assert await states() == [("answered", "Yes"), ("open", None), ("expired", "No"), ("open", None)]
    assert await store.write(asks.expire_due, 1) == 1
    assert await states() == [("answered", "Yes"), ("open", None), ("expired", "No"), ("expired", None)]
    assert await store.write(asks.expire_due) == 1
    assert await states() == [("answered", "Yes"), ("expired", None), ("expired", "No"), ("expired", None)]
    more = [await store.write(asks.create, "alice", new(deadline=START + timedelta(minutes=6)), KNOWN)
            for _ in range(3)]
    store.clock.advance(minutes=1)
    assert await store.write(asks.expire_due) == 3
    assert [(await store.read(asks.get, "bob", a["id"]))[0]["status"] for a in more] == ["expired"] * 3


async def test_of_two_processes_expiring_an_ask_at_once_one_does(two_stores):
    here, there = two_stores
    made = await here.write(asks.create, "alice", new(deadline=START + timedelta(minutes=1)), KNOWN)
    for each in two_stores:
        each.clock.advance(minutes=1)
    answers = []

    async def second():
        answers.append(await there.write(asks.expire_due))
    assert await while_held(here, asks.expire_due, second) == 1
    assert answers == [0]  # it found the ask due, then its conditional update changed nothing
    assert await here.read(types_logged) == ["ask", "ask_expired"]
    assert (await here.read(asks.get, "bob", made["id"]))[0]["status"] == "expired"

