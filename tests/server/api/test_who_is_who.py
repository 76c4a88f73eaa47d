"""Issue 28, who is who, over real HTTP on SQLite and PostgreSQL: the agent flag is set at invite, registration,
token creation and by an admin, declared for environment identities (COORD_AGENTS), and carried by messages,
asks, chat messages, presence and the users list; display names that read as another identity's are refused."""
from __future__ import annotations

import pytest

from coordserver.domain import identities
from coordserver.domain.lookalike import name_key
from tests.helpers import client, ok
from tests.sse_helpers import run_unit


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url, env={"COORD_AGENTS": "carol"})


def invite(srv, **fields) -> str:
    return ok(client(srv, "admin").post("/api/auth/invites", json=fields))["invite"]["code"]


def register(srv, code: str, identity: str, **fields):
    return client(srv).post("/api/auth/register", json={"code": code, "identity": identity, **fields})


def users(srv) -> dict[str, dict]:
    return {u["id"]: u for u in ok(client(srv, "alice").get("/api/users"))["users"]}


def test_the_kind_is_set_at_invite_registration_and_by_an_admin(srv):
    code = invite(srv, isAgent=True)
    made = ok(register(srv, code, "build-bot", isAgent=False))  # the invite's kind decides
    assert made["isAgent"] is True
    assert ok(register(srv, invite(srv), "review-bot", isAgent=True))["isAgent"] is True
    assert ok(register(srv, invite(srv), "dora"))["isAgent"] is False  # unsaid: a human
    listed = users(srv)
    assert (listed["build-bot"]["isAgent"], listed["review-bot"]["isAgent"], listed["dora"]["isAgent"]) \
        == (True, True, False)
    assert (listed["carol"]["isAgent"], listed["alice"]["isAgent"]) == (True, False)  # COORD_AGENTS
    ok(client(srv, "admin").patch("/api/admin/users/dora", json={"isAgent": True}))
    assert users(srv)["dora"]["isAgent"] is True
    invites = ok(client(srv, "admin").get("/api/auth/invites"))["invites"]
    assert {i["code"]: i["isAgent"] for i in invites}[code] is True


def test_token_creation_sets_the_kind(srv):
    def issue(identity, is_agent):
        return identities.issue_token(identity, False, None, "operator", None, is_agent)[0].identity
    run_unit(srv, issue, "cli-bot", True)
    run_unit(srv, issue, "cli-human", None)
    listed = users(srv)
    assert (listed["cli-bot"]["isAgent"], listed["cli-human"]["isAgent"]) == (True, False)
    run_unit(srv, issue, "cli-bot", False)  # a new token for the identity may change it
    assert users(srv)["cli-bot"]["isAgent"] is False


def test_every_payload_carries_the_senders_kind(srv):
    alice, carol = client(srv, "alice"), client(srv, "carol")
    from_carol = ok(carol.post("/api/mailboxes/alice/messages", json={"title": "from an agent"}))
    from_alice = ok(alice.post("/api/mailboxes/carol/messages", json={"title": "from a human"}))
    assert (from_carol["fromIsAgent"], from_alice["fromIsAgent"]) == (True, False)
    inbox = ok(alice.get("/api/mailboxes/me/messages"))["messages"]
    assert [(m["sender"], m["fromIsAgent"]) for m in inbox] == [("carol", True)]
    assert [m["fromIsAgent"] for m in ok(carol.get("/api/mailboxes/me/messages"))["messages"]] == [False]
    assert ok(alice.get("/api/mailboxes/me/sent"))["messages"][0]["fromIsAgent"] is False

    asked = ok(carol.post("/api/asks", json={"to": "alice", "question": "Ship?", "options": ["yes", "no"]}))
    assert asked["fromIsAgent"] is True
    assert [a["fromIsAgent"] for a in ok(alice.get("/api/asks"))["asks"]] == [True]

    channel = ok(alice.post("/api/chat/channels", json={"type": "dm", "identity": "carol"}))["channelId"]
    assert ok(carol.post(f"/api/chat/channels/{channel}/messages", json={"body": "hi"}))["isAgent"] is True
    ok(alice.post(f"/api/chat/channels/{channel}/messages", json={"body": "hello"}))
    history = ok(alice.get(f"/api/chat/channels/{channel}/messages"))["messages"]
    assert [(m["sender"], m["isAgent"]) for m in history] == [("carol", True), ("alice", False)]

    presence = ok(alice.get("/api/presence"))
    assert (presence["carol"]["isAgent"], presence["alice"]["isAgent"]) == (True, False)


@pytest.mark.parametrize("name", ["Alice", "ALICE", "\u0430lice",  # Cyrillic а
                                  "\uff41\uff4c\uff49\uff43\uff45",  # fullwidth
                                  "al\u200bice", "a l i c e", "Al\u0456ce",  # zero-width space, spaces, Cyrillic і
                                  "C\u0430rol", "\u0391lice"])  # Greek Α
def test_registration_refuses_a_name_that_reads_as_anothers(srv, name):
    code = invite(srv, maxUses=2)
    refused = register(srv, code, "mallory", displayName=name)
    assert refused.status_code == 409 and "reads as the name of identity" in refused.json()["error"]
    invites = ok(client(srv, "admin").get("/api/auth/invites"))["invites"]
    assert {i["code"]: i["useCount"] for i in invites}[code] == 0  # nothing written
    assert "mallory" not in users(srv)
    assert ok(register(srv, code, "mallory", displayName="Mallory"))["identity"] == "mallory"


def test_profile_and_admin_changes_refuse_look_alikes(srv):
    bob, admin = client(srv, "bob"), client(srv, "admin")
    refused = bob.post("/api/auth/setup-profile", json={"displayName": "\u0410LICE"})
    assert refused.status_code == 409 and "alice" in refused.json()["error"]
    ok(bob.post("/api/auth/setup-profile", json={"displayName": "Bob the Builder"}))
    assert ok(client(srv, "alice").post("/api/auth/setup-profile", json={"displayName": "Alice"}))  # its own name
    assert users(srv)["alice"]["displayName"] == "Alice"
    bad = admin.patch("/api/admin/users/bob", json={"displayName": "\uff21lice"})
    assert bad.status_code == 409 and "error" in bad.json()
    assert users(srv)["bob"]["displayName"] == "Bob the Builder"
    # another identity's display name counts too, not only its id
    taken = client(srv, "carol").post("/api/auth/setup-profile", json={"displayName": "bob-the-builder"})
    assert taken.status_code == 409


def test_name_key_folds_what_a_reader_cannot_tell_apart():
    assert name_key("Alice") == name_key("\u0430\u217c\u0456\u0441\u0435") == name_key("A\u200dL\u00adI C E") == "alice"
    assert name_key("Zoë") == "zoe" and name_key("build_bot") == name_key("Build Bot")
    assert name_key("Alice") != name_key("Alicia")
