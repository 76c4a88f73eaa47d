"""Text from the server made safe for a terminal: the one place coordtui neutralises it.

Anything another identity or an outside system wrote (mail, chat, tasks, projects, links, notebook pages,
buzz events, display names, error messages) may hold bytes a terminal executes: ESC sequences (window title,
clear screen, clipboard writes through OSC 52, OSC 8 hyperlinks), C1 controls (U+0080–U+009F, which some
terminals read as ESC + a letter: U+009B is CSI), BEL, and bidirectional overrides and isolates ("Trojan
source" text that reads differently than it is). The SDK passes every string it decodes through
`neutralise_json` (JSON answers, SSE events, notebook frames), so panes, toasts, dialogs, the notebook view
and the CLI only ever see the neutralised text.

Each such code point becomes ONE visible code point: C0 controls their Unicode control picture (ESC -> ␛,
U+241B), DEL ␡ (U+2421), C1 controls and bidi controls U+FFFD (�). Newline and tab stay. Lengths in code
points are unchanged, so an index into the neutralised text is an index into the original: the notebook
editor relies on that to show a shared document without rewriting it.

The server keeps and returns the text unchanged: only what reaches a screen is neutralised.
"""
from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"
C0_KEPT = frozenset("\n\t")
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # LRE..RLO, LRI..PDI

_PLACEHOLDERS: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in C0_KEPT},
    0x7F: "\u2421",
    **{code: REPLACEMENT for code in range(0x80, 0xA0)},
    **{code: REPLACEMENT for code in BIDI_CONTROLS},
}


def neutralise(text: str) -> str:
    """`text` with every terminal control (except newline and tab) replaced by one visible placeholder."""
    return text.translate(_PLACEHOLDERS)


def neutralise_json(value: Any) -> Any:
    """Decoded JSON with every string in it neutralised, object keys included."""
    if isinstance(value, str):
        return neutralise(value)
    if isinstance(value, dict):
        return {neutralise(k) if isinstance(k, str) else k: neutralise_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [neutralise_json(v) for v in value]
    return value
