"""The MCP tools' text content made safe for a terminal: agent front-ends print it in one.

A tool's text (its one-line summary, the JSON of its answer, a refusal) quotes what other identities and
outside systems wrote: titles, bodies, names. JSON already escapes C0 controls, but not DEL, the C1 controls
(U+0080–U+009F; U+009B is CSI to some terminals) or bidirectional overrides and isolates ("Trojan source"),
and the summaries quote text as it is. `terminal_safe` shows each of those as ONE visible placeholder: C0
controls as their control picture (ESC -> ␛), DEL ␡, C1 and bidi controls U+FFFD; newline and tab stay.

The structured content stays exactly what the REST route answers (JSON, like the API): only the text meant
to be shown is neutralised. coordtui does the same for everything it shows (coordtui/client/safe_text.py,
which this package may not import); tests/test_terminal_text.py holds both to the same table.
"""
from __future__ import annotations

REPLACEMENT = "\ufffd"
C0_KEPT = frozenset("\n\t")
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # LRE..RLO, LRI..PDI

_PLACEHOLDERS: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in C0_KEPT},
    0x7F: "\u2421",
    **{code: REPLACEMENT for code in range(0x80, 0xA0)},
    **{code: REPLACEMENT for code in BIDI_CONTROLS},
}


def terminal_safe(text: str) -> str:
    """`text` with every terminal control (except newline and tab) replaced by one visible placeholder."""
    return text.translate(_PLACEHOLDERS)
