"""Standard JSON (RFC 8259) only, in and out.

Python's json module reads and writes `NaN`, `Infinity` and `-Infinity` (and reads `1e400` as
infinity), which strict parsers - PostgreSQL's json type among them - refuse. It also decodes a lone
surrogate escape ("\\ud800") into a string that cannot be encoded as UTF-8, and recurses once per
nesting level. Every request body is read through `loads` here, so none of that reaches a handler;
text holding NUL (U+0000), which PostgreSQL cannot store, is refused the same way on both backends.

What the server writes escapes DEL, the C1 controls and the bidirectional overrides and isolates
(`\\u009b`, `\\u202e`) as well as the C0 controls json always escapes: the text is unchanged for a JSON
reader, and `curl` in a terminal never hands those characters to the terminal (issue 31).

Stored JSON written before this rule may still hold non-finite numbers: `loads_lenient` reads them as
null, so such a row never breaks a listing.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, TypeAlias

# A JSON object as a request carries it or a response will (keys in the wire's camelCase): its fields are
# declared by the request or response model in schemas/, which the edge checks; in here it is a dict.
JSONObject: TypeAlias = dict[str, Any]

MAX_DEPTH = 100
# Only an escape can put a lone surrogate or a NUL into a decoded string (raw NUL bytes are invalid
# JSON and raw surrogates invalid UTF-8), so most bodies skip the walk over the decoded value.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")
# Characters a terminal may act on that json.dumps(ensure_ascii=False) leaves raw; outside strings JSON
# is ASCII, so escaping them in the serialised text is exact.
_TERMINAL_ACTIVE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class JSONRejected(ValueError):
    """The text is not standard JSON, or holds what no stored text may hold; the message says which."""


def _no_constant(name: str):
    raise JSONRejected(f"Request body is not standard JSON: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONRejected(f"Request body is not standard JSON: {text[:40]} is out of range")
    return value


# Made once: json.loads with parse_constant/parse_float builds a decoder (and its scanner) on every call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def loads(raw: bytes | str) -> Any:
    """Parse standard JSON. Raises JSONRejected (a ValueError) naming the problem."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
    except UnicodeDecodeError:
        raise JSONRejected("Request body is not valid JSON (not UTF-8)") from None
    try:
        value = _DECODER.decode(text)  # refuses a byte order mark too, as json.loads did
    except JSONRejected:
        raise
    except RecursionError:
        raise JSONRejected(f"Request body is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise JSONRejected("Request body is not valid JSON") from None
    if _SUSPECT_ESCAPE.search(text) or text.count("[") + text.count("{") > MAX_DEPTH:
        check_value(value)
    return value


def check_value(value: Any) -> None:
    """Walk a decoded value (without recursion): nesting depth, and every string and key."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            check_text(item)
        elif isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise JSONRejected(f"Request body is nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                item = item.values()
            stack.extend((child, depth + 1) for child in item)


def check_text(text: str, what: str = "Request body") -> None:
    """NUL and lone surrogates are refused in any text the server would store or search."""
    if "\x00" in text:
        raise JSONRejected(f"{what} contains a NUL character (\\u0000), which is not allowed in text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONRejected(f"{what} contains a lone surrogate (an unpaired \\ud800-\\udfff escape), "
                           "which is not valid Unicode") from None


def dumps(value: Any, **kwargs) -> str:
    """Compact standard JSON; a non-finite number raises ValueError instead of leaving as `NaN`."""
    kwargs.setdefault("separators", (",", ":"))
    kwargs.setdefault("ensure_ascii", False)
    return escape_terminal_active(json.dumps(value, allow_nan=False, **kwargs))


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_terminal_active(text: str) -> str:
    """Serialised JSON with the characters a terminal acts on written as `\\uXXXX` escapes."""
    if text.isascii() and "\x7f" not in text:  # most answers: isascii is a flag of the str, the test a memchr
        return text
    return _TERMINAL_ACTIVE.sub(_escaped, text)


def _null(_name: str) -> None:
    return None


def _float_or_null(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def loads_lenient(text: str) -> Any:
    """For JSON already stored: non-finite numbers (legacy rows) read as null."""
    return json.loads(text, parse_constant=_null, parse_float=_float_or_null)
