"""domain/fields.py (true/false fields, http(s) links, the white space the schemas state) and domain/fulltext.py
(a user query reduced to words, every word must match, on both backends: through messages.search).
Fast: the mutation runs of both modules use these."""
from __future__ import annotations

import re

import pytest

from coordserver.domain import fields, fulltext, messages
from coordserver.errors import Invalid
from coordserver.models import Message
from coordserver.timeutil import to_db
from tests.server.domain.conftest import START


@pytest.mark.parametrize("value", [True, False])
def test_a_flag_is_true_or_false(value):
    assert fields.flag(value, "enabled") is value


@pytest.mark.parametrize("value", [None, 1, 0, "true", "yes", [], {}])
def test_anything_else_is_no_flag(value):
    with pytest.raises(Invalid) as refused:
        fields.flag(value, "enabled")
    assert refused.value.message == "enabled must be true or false"


@pytest.mark.parametrize("value", [None, "http://a", "https://a.ex/x?y#z", "HtTpS://A", "https://" + "x" * 12])
def test_an_optional_http_url(value):
    assert fields.optional_http_url(value, "link", 20) == value


@pytest.mark.parametrize("value", ["ftp://a", "https:/a", "//a", " https://a", "https://" + "x" * 13, 5, ["http://a"],
                                   "mailto:a@b", "httpx://a"])
def test_what_is_no_http_url(value):
    with pytest.raises(Invalid) as refused:
        fields.optional_http_url(value, "link", 20, ", or null")
    assert refused.value.message == "link must be an http or https URL of at most 20 characters, or null"
    with pytest.raises(Invalid) as refused:
        fields.optional_http_url(value, "link", 20)
    assert refused.value.message == "link must be an http or https URL of at most 20 characters"


def test_the_stated_white_space_is_what_python_strips():
    """WS and NON_WS state in a regex (for the JSON schemas) what str.strip() and str.split() see."""
    space = re.compile(fields.WS)
    non_space = re.compile(fields.NON_WS)
    for code in range(0x3001):
        char = chr(code)
        assert bool(space.fullmatch(char)) is char.isspace(), hex(code)
        assert bool(non_space.fullmatch(char)) is (not char.isspace() and char != "\x00"), hex(code)


@pytest.mark.parametrize("query, words", [
    ('say "hello" OR world*', ["say", "hello", "OR", "world"]), ("naïve café_2", ["naïve", "café_2"]),
    ("\x00-- ; ()", []), ("", []),
    (" ".join(f"w{n}" for n in range(40)), [f"w{n}" for n in range(32)]),
])
def test_a_query_is_reduced_to_its_words(query, words):
    assert fulltext.words(query) == words


@pytest.fixture
def inbox(rules_store):
    def fill():
        for n, (title, body) in enumerate([("Deploy plan", "the rollout starts monday"),
                                           ('Quote "marks"', "and stars* and OR NOT"),
                                           ("Lunch", "tacos on friday")]):
            Message.create(recipient="ann", sender="bob", title=title, body=body,
                           created_at=to_db(START.replace(minute=n)))
        Message.create(recipient="cid", sender="bob", title="Deploy", body="not ann's", created_at=to_db(START))
    rules_store.run_sync(fill)
    return rules_store


def found(store, query: str) -> list[str]:
    return [m["title"] for m in store.run_sync(messages.search, "ann", query, 10)["messages"]]


@pytest.mark.parametrize("query, titles", [
    ("deploy", ["Deploy plan"]), ("DEPLOY monday", ["Deploy plan"]), ("deploy friday", []),
    ('"marks" OR', ['Quote "marks"']), ("stars*", ['Quote "marks"']), ("NOT", ['Quote "marks"']),
    ("tacos)", ["Lunch"]), ('"', []), ("", []),
])
def test_every_word_must_match_and_nothing_reaches_the_parser(inbox, query, titles):
    assert found(inbox, query) == titles


def test_words_past_the_32nd_are_not_searched(inbox):
    assert found(inbox, " ".join(["deploy"] * 32 + ["nowhere"])) == ["Deploy plan"]
    assert found(inbox, " ".join(["deploy"] * 31 + ["nowhere"])) == []


def test_a_term_with_quotes_is_searched_as_its_words(inbox):
    """condition() takes any terms safely: a quote inside one is text, not query syntax."""
    def search(terms):
        def unit():
            matching = fulltext.condition(Message, "message_fts", messages._MESSAGE_DOCUMENT, terms)
            return [m.title for m in Message.select().where((Message.recipient == "ann") & matching)]
        return inbox.run_sync(unit)
    assert search(['rollout"starts']) == ["Deploy plan"]
    assert search(['"marks"']) == ['Quote "marks"']
