"""Directory (links) request and response models (API.md §12)."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.directory import DESCRIPTION_MAX, TAGGED_MAX, TITLE_MAX, URL_MAX, URL_RE
from .base import NOT_BLANK, Model, at_least_one
from .common import Identity, Success, TextSearchQuery, Time

_REQUIRED = "title and url are required"
_URL_MESSAGES = {"url:format": "url must be an http or https URL", "url:length": f"url is longer than {URL_MAX} characters"}

# A link's fields as POST and PATCH take them (one place for their limits).
LinkTitle = Annotated[str, msgspec.Meta(pattern=NOT_BLANK, description=f"longer than {TITLE_MAX} characters is cut")]
LinkUrl = Annotated[str, msgspec.Meta(max_length=URL_MAX, pattern=URL_RE.pattern, description="http or https")]
LinkDescription = Annotated[str, msgspec.Meta(max_length=DESCRIPTION_MAX)]
TaggedUsers = Annotated[list[Identity], msgspec.Meta(max_length=TAGGED_MAX)]


def cut_title(title: str) -> str:
    """A link title as stored: trimmed, and cut to its limit (not refused)."""
    return title.strip()[:TITLE_MAX]


class DirectoryQuery(TextSearchQuery):
    """GET /api/directory."""


class CreateLink(Model):
    """POST /api/directory. A title longer than its limit is cut; the url must be http(s)."""
    __messages__ = {"title": _REQUIRED, "url": _REQUIRED, **_URL_MESSAGES}
    title: LinkTitle
    url: LinkUrl
    description: LinkDescription | None = None
    tagged_users: TaggedUsers | None = None

    def __post_init__(self) -> None:
        self.title = cut_title(self.title)


@at_least_one
class LinkFields(Model, forbid_unknown_fields=True):
    """PATCH /api/directory/{id} (creator or admin): at least one of these fields, the others stay as they are.
    The same limits as POST (a title longer than its limit is cut); null description or taggedUsers clears it.
    A field this route does not know is refused (400), not ignored."""
    __messages__ = {"title": "title must be text that is not blank", "url": "url must be an http or https URL",
                    **_URL_MESSAGES}
    title: LinkTitle | UnsetType = UNSET
    url: LinkUrl | UnsetType = UNSET
    description: LinkDescription | None | UnsetType = UNSET
    tagged_users: TaggedUsers | None | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.title, str):
            self.title = cut_title(self.title)


class DirectoryEntry(Model):
    """A directory link."""
    id: int
    title: str
    url: str
    description: str | None
    created_by: str
    created_by_is_agent: bool  # who is who: its creator is an agent
    tagged_users: list[str] | None
    created_at: Time


DirectoryEntries = list[DirectoryEntry]  # GET /api/directory answers a bare array (v1)


class EntryDeleted(Success):
    """A deleted entry's id."""
    id: int
