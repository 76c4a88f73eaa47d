"""Shapes shared by every area: the error body, acknowledgements, times, paging limits."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..domain.fields import WS
from ..domain.identities import IDENTITY_INPUT_RE, IDENTITY_MAX
from ..settings import IDENTITY_RE
from .base import PATTERN_RULES, Model, Query, trimmed

LIMIT_CAP = 100
SEARCH_MAX = 500  # a search's `q`, in characters
# limit defaults to 50; values above the cap are lowered, not refused.
Limit = Annotated[int, msgspec.Meta(ge=1, description=f"at most {LIMIT_CAP}: larger values are lowered to it")]
_ONE = IDENTITY_INPUT_RE.pattern[1:-1]
# Blank, or one identity (trimmed): a Buzz agent field, where blank means none.
IDENTITY_OR_BLANK_PATTERN = rf"^{WS}*(?:{_ONE})?{WS}*$"
IdentityOrBlank = Annotated[str, msgspec.Meta(pattern=IDENTITY_OR_BLANK_PATTERN)]
# Identities separated by commas, blank entries skipped.
IDENTITY_LIST_PATTERN = rf"^{WS}*(?:{_ONE})?{WS}*(?:,{WS}*(?:{_ONE})?{WS}*)*$"
Identity = Annotated[str, msgspec.Meta(pattern=trimmed(IDENTITY_INPUT_RE.pattern),
                                      description="an identity (stored in lower case)")]
IDENTITY_RULE = f"identity must match {IDENTITY_RE.pattern} and be at most {IDENTITY_MAX} characters"
PATTERN_RULES[f"(?:{IDENTITY_INPUT_RE.pattern[1:-1]})"] = IDENTITY_RULE  # as msgspec quotes it
Time = Annotated[str, msgspec.Meta(description="ISO-8601 time", extra_json_schema={"format": "date-time"})]  # answers: UTC with milliseconds and Z


def capped(n: int) -> msgspec.Meta:
    """`Annotated[str, capped(n)]`: text of at most `n` characters, as the domain's limit says."""
    return msgspec.Meta(max_length=n)


def clamp_limit(value: int, cap: int = LIMIT_CAP) -> int:
    return min(value, cap)


class TextSearchQuery(Query):
    """A list searched by text and paged by offset: a blank `q` lists everything."""
    q: str | None = None
    limit: Limit = 50
    offset: Annotated[int, msgspec.Meta(ge=0, le=2**62)] = 0

    def __post_init__(self) -> None:
        self.q = (self.q or "").strip() or None
        self.limit = clamp_limit(self.limit)


class Error(Model):
    """Every 4xx and 5xx body."""
    error: str


class Ok(Model):
    """The answer of a change with nothing else to report: `{"ok": true}`."""
    ok: bool


class Success(Model):
    """The answer of an archive or delete that v1 words as `{"success": true}`."""
    success: bool
