"""Field checks shared by the areas whose bodies hold flags and links (workflows, recurring templates, Buzz
webhooks, users, projects). The request models check shapes at the HTTP edge; these keep a domain function
safe to call without HTTP (CLI, scheduler, tests) and word the refusal the same way."""
from __future__ import annotations

import re

from ..errors import Invalid

# White space as str.strip() and str.split() see it, spelled out: `\s` differs between Python's re (which agrees
# with strip) and the ECMA-262 regexes of JSON Schema (no \x1c-\x1f or \x85, but \ufeff), so the patterns a
# schema states use these instead.
WS_CHARS = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
WS, NON_WS = f"[{WS_CHARS}]", f"[^{WS_CHARS}\\x00]"  # (no text holds NUL)
HTTP_URL = re.compile(r"^[Hh][Tt][Tt][Pp][Ss]?://")  # what an http(s) link field starts with (the models say so too)


def flag(value: object, field: str) -> bool:
    """A true/false field: anything else (null, "yes", 1) is refused."""
    if not isinstance(value, bool):
        raise Invalid(f"{field} must be true or false")
    return value


def optional_http_url(value: object, field: str, max_len: int, nullable_note: str = "") -> str | None:
    """null, or an http(s) URL of at most `max_len` characters. `nullable_note` ends the message (", or null")."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len or not HTTP_URL.match(value):
        raise Invalid(f"{field} must be an http or https URL of at most {max_len} characters{nullable_note}")
    return value
