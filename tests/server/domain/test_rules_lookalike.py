"""Display names that cannot impersonate (issue 28) through the store, no HTTP, on both backends: the key two
names are compared by (what folds together and what stays apart), and which names are taken from whom, with
the refusal in its words and nothing written."""
from __future__ import annotations

import pytest

from coordserver.domain import users
from coordserver.domain.lookalike import name_key, require_own_name
from coordserver.errors import Conflict
from coordserver.models import Token, User
from coordserver.timeutil import to_db
from tests.server.domain.conftest import START


@pytest.mark.parametrize("name, key", [
    ("Alice", "alice"), ("\uff21\uff4c\uff49\uff43\uff45", "alice"),  # fullwidth (NFKC)
    ("\ufb01ne", "fine"), ("\u2167", "viii"),  # a ligature and a roman numeral: compatibility forms
    ("STRASSE", "strasse"), ("Stra\u00dfe", "strasse"), ("\u1e9e", "ss"),  # casefolded: capital sharp s too
    ("Zo\u00eb", "zoe"), ("Zoe\u0308", "zoe"), ("\u00c5ngstr\u00f6m", "angstrom"),  # accents, composed or not
    ("a b\u00a0c\u2003d", "abcd"), ("a\u200bb\u200dc\u00add\ufeff", "abcd"), ("a\tb\x07c", "abc"),  # Z, Cf, Cc
    ("build_bot", "buildbot"), ("o'neil-smith.jr", "oneilsmithjr"), ("\u00abx\u00bb\u2014y", "xy"),  # P
    ("\u0430\u217c\u0456\u0441\u0435", "alice"), ("\u03b1\u03b9", "ai"), ("\u043d\u043f", "hn"),  # look-alikes
    ("b!ll", "blll"), ("p@$$", "pass"), ("a|b", "alb"), ("l0st", "lost"), ("\u0131\u0142", "il"),  # P, S mapped
    ("c++", "c++"), ("a=b~c", "a=b~c"), ("r2d2", "r2d2"), ("\u2603", "\u2603"),  # other symbols and digits kept
    ("", ""), (" .-_ ", "")])
def test_the_key_folds_what_a_reader_cannot_tell_apart(name, key):
    assert name_key(name) == key


def test_names_a_reader_can_tell_apart_keep_apart_keys():
    assert len({name_key(n) for n in ("Alice", "Alicia", "Alise", "Al1ce ", "Allce", "Alice2", "Ali+ce")}) == 6
    assert name_key("Al1ce ") == name_key("Allce")


def people() -> None:
    """bob (display name "Bob the Builder"), carol archived, dave with a blank display name, erin known only by a
    token, alice's own row and token."""
    stamp = to_db(START)
    for identity, display, archived in (("alice", "Alice", None), ("bob", "Bob the Builder", None),
                                        ("carol", "Carol", stamp), ("dave", "", None)):
        User.create(id=identity, display_name=display, created_at=stamp, updated_at=stamp, archived_at=archived)
    for n, identity in enumerate(("alice", "erin", "erin")):
        Token.create(identity=identity, token_hash=f"h{n}", created_at=stamp)


def owner(identity: str, display_name: str, env: frozenset[str] = frozenset({"frank", "alice"})) -> str | None:
    try:
        require_own_name(identity, display_name, env)
    except Conflict as refused:
        return refused.message
    return None


def taken(name: str, holder: str) -> str:
    return f"displayName '{name}' reads as the name of identity '{holder}': choose another"


@pytest.mark.parametrize("identity, name, holder", [
    ("alice", "B0B", "bob"), ("alice", "bob-the-builder", "bob"),  # an id, a display name
    ("alice", "\u0421AROL", "carol"), ("alice", "c a r o l", "carol"),  # archived rows too
    ("alice", "Erin", "erin"), ("bob", "\u0435rin", "erin"),  # a token's identity
    ("alice", "FRANK", "frank"), ("bob", "\u0430lice", "alice"),  # the environment's, others' own names
    ("alice", "Alice", None), ("alice", "al!ce", None), ("erin", "ERIN", None), ("frank", "Frank", None),  # own
    ("alice", "Builder", None), ("alice", "Carol the Second", None),  # a part of a name is not the name
    ("alice", "---", None), ("alice", "\u200b", None),  # no key: nothing to read as anyone
    ("alice", "X x X x", None)])  # dave's blank display name holds no name, whatever the name
async def test_a_name_is_refused_when_it_reads_as_anothers(rules_store, identity, name, holder):
    store = rules_store
    await store.write(people)
    assert await store.read(owner, identity, name) == (taken(name, holder) if holder else None)


async def test_a_refused_profile_change_writes_nothing(rules_store):
    store = rules_store
    await store.write(people)
    with pytest.raises(Conflict) as refused:
        await store.write(users.setup_profile, "alice", "Bob The Builder", frozenset())
    assert refused.value.message == taken("Bob The Builder", "bob")
    with pytest.raises(Conflict) as refused:
        await store.write(users.admin_update, "bob", {"displayName": "\uff21lice"}, frozenset())
    assert refused.value.message == taken("\uff21lice", "alice")
    assert await store.read(lambda: sorted(db_names())) == [("alice", "Alice"), ("bob", "Bob the Builder"),
                                                           ("carol", "Carol"), ("dave", "")]
    assert await store.write(users.setup_profile, "alice", "Alice Liddell", frozenset()) == {
        "identity": "alice", "displayName": "Alice Liddell"}


def db_names() -> list[tuple[str, str]]:
    return [(u.id, u.display_name) for u in User.select()]
