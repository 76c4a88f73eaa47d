"""Field checks shared by the areas whose bodies hold flags and links (workflows, recurring templates, Buzz
webhooks, users, projects). The request models check shapes at the HTTP edge; these keep a domain function
safe to call without HTTP (CLI, scheduler, tests) and word the refusal the same way."""
from __future__ import annotations

import re

from ..errors import Invalid

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
