"""Resource names and globs for reservations, and the overlap test (skill page `reservations`).

A resource is a path of segments separated by `/` (`src/app.py`) or a single name (`service:postgres-main`).
In a segment, `*` matches any run of characters (none included) and `?` exactly one; a segment that is
exactly `**` matches any number of whole segments, none included (`src/**` covers `src` and everything under
it). Every other character is literal (`[` too). A trailing `/` means the whole directory: `src/` is `src/**`.

Two resources OVERLAP when some path matches both. `witness(a, b)` decides it exactly, and returns such a path
(or None): a product of the two patterns walked segment by segment, and inside two single segments character
by character, with memoisation (time O(len(a) * len(b)) per level). The rules (DSTAR is a `**` segment):
- both patterns used up: the empty remainder matches both;
- a DSTAR on either side may match no segment (skip it) or one more segment of the other side (stay on it);
- two single segments must share a string (segment_witness), then the rest must overlap.
The same recursion at the character level: a `*` skips, or takes one character the other side can take.
Because a witness is built, not guessed, a "no" is exact too: tests/server/domain/test_resource_globs.py checks
each witness against both patterns compiled to regular expressions, and random paths against the verdicts.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from ..errors import Invalid

RESOURCE_MAX = 500
DSTAR = "**"


def normalise(resource: object) -> str:
    """A resource as stored and compared: trimmed, no `./` prefix, no empty segment (repeated, leading or trailing
    `/`), and a trailing `/` read as `/**` (`/` alone is `**`, everything). 400 when blank or over RESOURCE_MAX."""
    if not isinstance(resource, str) or not resource.strip():
        raise Invalid("resource is required")
    if len(resource) > RESOURCE_MAX:
        raise Invalid(f"resource is longer than {RESOURCE_MAX} characters")
    text = resource.strip()
    while text.startswith("./"):
        text = text[2:]
    segments = [s for s in text.split("/") if s]
    if text.endswith("/") or not segments:
        if not segments or segments[-1] != DSTAR:
            segments.append(DSTAR)
    return "/".join(segments)


def overlaps(a: str, b: str) -> bool:
    """Whether some path matches both (normalised) resources."""
    return witness(a, b) is not None


def witness(a: str, b: str) -> str | None:
    """A path matching both (normalised) resources, or None when no path does."""
    return _path_witness(tuple(a.split("/")), tuple(b.split("/")))


@lru_cache(maxsize=4096)
def _path_witness(a: tuple[str, ...], b: tuple[str, ...]) -> str | None:
    found = _product(a, b, DSTAR, _one_segment, lambda x, y: (segment_witness(x, y),))
    if found is None:
        return None
    return "/".join(found) or "x"  # no segment only when both are all `**`: then any path matches both


def _one_segment(pattern: str) -> str:
    """A segment a `**` may take to match `pattern` (never empty: "x" matches an all-star pattern too)."""
    return segment_witness(pattern, "*") or "x"


@lru_cache(maxsize=4096)
def segment_witness(a: str, b: str) -> str | None:
    """A string (without `/`) matching both segment patterns (`*`, `?`, literals), or None."""
    found = _product(tuple(a), tuple(b), "*", lambda c: "x" if c == "?" else c, _same_character)
    return None if found is None else "".join(found)


def _same_character(x: str, y: str) -> tuple[str | None]:
    if x == y or y == "?":
        return (x if x != "?" else "x",)
    return (y,) if x == "?" else (None,)


def _product(a: tuple[str, ...], b: tuple[str, ...], star: str, taken: Callable[[str], str],
             both: Callable[[str, str], tuple[str | None]]) -> list[str] | None:
    """A sequence of tokens matched by both patterns (sequences of tokens where `star` matches any run of
    tokens), or None. `taken(t)`: a token the single pattern `t` matches (what a star takes from the other
    side); `both(x, y)`: `(token,)` matched by both single patterns, `(None,)` if none.

    Bottom-up over (i, j), the suffixes a[i:] and b[j:] (no recursion, so long names cannot exhaust the stack):
    `step[i][j]` is how the witness of those suffixes begins, None when they share nothing."""
    n, m = len(a), len(b)
    step: list[list[tuple[int, int, str | None] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    end = (n, m, None)
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                step[i][j] = end
                continue
            choice: tuple[int, int, str | None] | None = None
            if i < n and a[i] == star:
                if step[i + 1][j] is not None:  # a's star takes nothing more
                    choice = (i + 1, j, None)
                elif j < m and b[j] != star and step[i][j + 1] is not None:  # or what b's next pattern matches
                    choice = (i, j + 1, taken(b[j]))
            if choice is None and j < m and b[j] == star:
                if step[i][j + 1] is not None:
                    choice = (i, j + 1, None)
                elif i < n and a[i] != star and step[i + 1][j] is not None:
                    choice = (i + 1, j, taken(a[i]))
            if choice is None and i < n and j < m and star not in (a[i], b[j]) and step[i + 1][j + 1] is not None:
                (token,) = both(a[i], b[j])
                if token is not None:
                    choice = (i + 1, j + 1, token or "x")  # "" only for two all-star segments: "x" matches both
            step[i][j] = choice
    if step[0][0] is None:
        return None
    tokens: list[str] = []
    i, j = 0, 0
    while (i, j) != (n, m):
        nxt = step[i][j]
        assert nxt is not None
        i, j, token = nxt
        if token is not None:
            tokens.append(token)
    return tokens


def to_regex(resource: str) -> re.Pattern[str]:
    """The (normalised) resource as a regular expression over a path followed by `/` (see `matches`): the same
    language written the other way, for tests and for checking a path against a reservation."""
    parts = ["(?:[^/]+/)*" if segment == DSTAR else
             "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment) + "/"
             for segment in resource.split("/")]
    return re.compile("".join(parts))


def matches(resource: str, path: str) -> bool:
    """Whether the plain `path` is matched by the (normalised) resource."""
    return to_regex(resource).fullmatch(path + "/") is not None
