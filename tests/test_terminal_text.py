"""The two neutralising functions, held to one table: coordtui's (client/safe_text.py, everything the client
shows) and the MCP text's (coordserver/mcp/terminal_text.py). Neither package may import the other, so this
module checks they agree, at every boundary of every range."""
from __future__ import annotations

import pytest

from coordserver.mcp.terminal_text import terminal_safe
from coordtui.client.safe_text import neutralise, neutralise_json

FUNCTIONS = pytest.mark.parametrize("safe", [neutralise, terminal_safe], ids=["coordtui", "mcp"])

REPLACED = {
    "\x00": "\u2400", "\x07": "\u2407", "\x08": "\u2408", "\x0b": "\u240b", "\x0c": "\u240c", "\r": "\u240d",
    "\x1b": "\u241b", "\x1f": "\u241f",  # C0, last one
    "\x7f": "\u2421",  # DEL
    "\x80": "\ufffd", "\x85": "\ufffd", "\x9b": "\ufffd", "\x9c": "\ufffd", "\x9f": "\ufffd",  # C1, both ends
    "\u202a": "\ufffd", "\u202b": "\ufffd", "\u202c": "\ufffd", "\u202d": "\ufffd", "\u202e": "\ufffd",
    "\u2066": "\ufffd", "\u2067": "\ufffd", "\u2068": "\ufffd", "\u2069": "\ufffd",
}
KEPT = ["\n", "\t", " ", "~", "\xa0", "é", "ß", "\u2028", "\u2029", "\u202f", "\u2065", "\u206a", "🎉", "␛"]


@FUNCTIONS
@pytest.mark.parametrize("char, placeholder", REPLACED.items(), ids=[f"U+{ord(c):04X}" for c in REPLACED])
def test_each_control_becomes_one_visible_placeholder(safe, char, placeholder):
    assert safe(f"a{char}b") == f"a{placeholder}b"


@FUNCTIONS
@pytest.mark.parametrize("char", KEPT, ids=[f"U+{ord(c):04X}" for c in KEPT])
def test_text_and_the_neighbours_of_each_range_stay(safe, char):
    assert safe(f"a{char}b") == f"a{char}b"


@FUNCTIONS
def test_every_code_point_up_to_u20ff_is_replaced_exactly_when_it_is_a_control(safe):
    for code in range(0x2100):  # C0, DEL, C1, and the bidi controls among the general punctuation
        char = chr(code)
        control = (code < 0x20 and char not in "\n\t") or 0x7F <= code <= 0x9F or 0x202A <= code <= 0x202E \
            or 0x2066 <= code <= 0x2069
        shown = safe(char)
        assert len(shown) == 1, hex(code)
        assert (shown != char) == control, hex(code)


@FUNCTIONS
def test_the_issue_payload_keeps_its_length_and_loses_every_escape(safe):
    payload = ("hello \x1b]0;PWNED-TITLE\x07 \x1b[2J\x1b[31mRED \x1b]52;c;ZXZpbA==\x07end \x1b[?1049l \x9b31m "
               "\x07 \u202eevil\u202c \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ é🎉")
    shown = safe(payload)
    assert len(shown) == len(payload)
    assert not any(c in shown for c in "\x1b\x07\x9b\u202e")
    assert "␛]0;PWNED-TITLE␇" in shown and "␛]8;;https://evil.example␛\\click" in shown and shown.endswith("é🎉")
    assert safe(shown) == shown


def test_json_answers_are_neutralised_throughout_keys_included():
    answer = {"messages": [{"title": "a\x1bb", "id": 3, "urgent": True, "thread": None, "tags": ["\x9b"]}],
              "ev\u202eil": {"nested": ["\x07", 1.5]}}
    assert neutralise_json(answer) == {
        "messages": [{"title": "a␛b", "id": 3, "urgent": True, "thread": None, "tags": ["\ufffd"]}],
        "ev\ufffdil": {"nested": ["␇", 1.5]}}
    assert neutralise_json("x\x1b") == "x␛" and neutralise_json(7) == 7
